"""The operator's report of the scripted incident: its numbers, read back from the HTML, and its rendering
in a real browser (Debian's headless Chromium), with a screenshot in which every chart has drawn marks."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.pipeline.browser import MISSING, Chromium, find_chromium
from tests.pipeline.conftest import INCIDENT_END, STORM_GENERATIONS

pytestmark = pytest.mark.timeout(900)  # Spark on a shared 2-core machine: minutes, not seconds

DETAILED = {"storm", "steady", "lagging", "rewind", "stopped", "warn", "static-app", "modern-app"}


class Tables(HTMLParser):
    """Every table's rows as lists of cell texts; and the whole text."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.text: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def parse(html: str) -> Tables:
    t = Tables()
    t.feed(html)
    return t


def rows_by_first_cell(table: list[list[str]]) -> dict[str, dict[str, str]]:
    head = table[0]
    return {row[0]: dict(zip(head, row, strict=True)) for row in table[1:]}


@pytest.fixture(scope="module")
def report(spark, incident, tmp_path_factory) -> Path:
    from groupd.pipeline.__main__ import run

    return run("report", incident["log_dirs"], tmp_path_factory.mktemp("report"), now_ms=INCIDENT_END)


def test_header_says_what_when_and_how_much(report, incident):
    html = report.read_text()
    text = " ".join(" ".join(parse(html).text).split())
    assert f"Store {Path(incident['log_dirs']).resolve()}" in text
    assert "Time span 2023-11-14 22:13:20 to 2023-11-14 22:18:20 UTC (5 min 00 s)" in text
    assert "statuses evaluated at 2023-11-14 22:18:20 UTC" in text
    assert "Groups 8 live, 1 deleted or expired" in text
    assert "Records 15 generations, 106 offset-commit records, 93 log-end samples" in text
    # said once; and with log-end history recorded, nothing to say about lag history
    assert text.count("What the store cannot tell") == 1 and "no log-end history" not in text


def test_groups_at_a_glance_carry_the_scripted_numbers(report):
    t = parse(report.read_text())
    glance = rows_by_first_cell(t.tables[0])
    assert set(glance) == DETAILED
    burrow = "Burrow status (worst partition: rule that fired)"
    assert (
        glance["lagging"][burrow] == "STALL orders-0: committed offset stuck at 40 over 10 commits while lag is 2,960"
    )
    assert glance["lagging"]["Lag now"] == "2,960"
    assert (
        glance["stopped"][burrow].startswith("STOP orders-1: no commit for 210 s")
        and glance["stopped"]["Lag now"] == "2,200"
    )
    assert glance["rewind"][burrow] == "REWIND payments-0: committed offset went backwards, 1,050 to 600"
    assert glance["rewind"]["Lag now"] == "650"
    assert glance["warn"][burrow] == "WARN orders-1: lag never decreased over 10 commits (500 to 950)"
    assert glance["steady"][burrow] == "OK orders-0: no lag now" and glance["steady"]["Lag now"] == "0"
    assert glance["storm"]["State"] == "Empty since 2023-11-14 22:14:26"
    assert glance["storm"]["Generations"] == str(STORM_GENERATIONS + 1)
    assert glance["storm"]["Last storm"] == f"2023-11-14 22:14:26 (peak {STORM_GENERATIONS + 1} in 60 s)"
    assert glance["static-app"]["Static restarts"] == "1" and glance["static-app"]["Generations"] == "1"
    assert glance["modern-app"]["State"] == "Stable, 1 member, epoch 3" and glance["modern-app"]["Kind"] == "consumer"
    # the worst first: the three in trouble, then the WARN
    assert [r[0] for r in t.tables[0][1:4]] == ["lagging", "stopped", "rewind"] and t.tables[0][4][0] == "warn"


def test_deleted_group_is_shown_once_with_when(report):
    html = report.read_text()
    t = parse(html)
    assert html.count("orders-app") == 1
    removed = next(tab for tab in t.tables if tab[0] == ["Group", "Removed at", "How"])
    assert removed[1:] == [["orders-app", "2023-11-14 22:15:20 UTC", "deleted"]]


def test_no_nan_or_float_noise_in_tables(report):
    t = parse(report.read_text())
    cells = [c for tab in t.tables for row in tab for c in row]
    assert cells and not [c for c in cells if re.search(r"\bnan\b|\bNone\b|\bNaT\b", c, re.I)]
    assert not [c for c in cells if re.fullmatch(r"-?\d+\.\d+", c)], "a bare float in a table"


def test_generation_tables_show_causes_durations_and_restarts(report):
    t = parse(report.read_text())
    gens = [tab for tab in t.tables if tab[0][0] in ("Generation", "Epoch")]
    storm = next(tab for tab in gens if len(tab) == STORM_GENERATIONS + 2)
    assert storm[1][1:4] == ["2023-11-14 22:13:40", "—", "4.0 s"] and storm[1][-1] == "● group formed"
    assert storm[-1][-2].startswith("c-u2, c-u3, c-u4, c-u7 and 6 more") and storm[-1][-1] == "● emptied"
    static = next(tab for tab in gens if any("static member i-2 restarted at 2023-11-14 22:15:00" in c for c in tab[1]))
    assert static[1][3] == "current"
    modern = next(tab for tab in gens if tab[0][0] == "Epoch")
    assert [r[-1] for r in modern[1:]] == ["● group formed", "● join", "● leave or session expiry"]


def test_without_log_end_history_the_report_says_so_once(spark, store, tmp_path):
    from groupd.pipeline.__main__ import run

    html = run("report", store["log_dirs"], tmp_path, now_ms=store["now_ms"]).read_text()
    text = " ".join(" ".join(parse(html).text).split())
    assert text.count("This store holds no log-end history") == 1 and "WARN (lag never decreasing) cannot show" in text


def mark_pixels(img, box) -> int:
    """Pixels of a chart's plotting side (its left 72%: legends sit right) in a saturated colour other
    than the storm shading: points, lines, bars."""
    x0, y0, x1, y1 = box
    crop = img.crop((x0, y0, x0 + int((x1 - x0) * 0.72), y1)).convert("RGB")
    n = 0
    for r, g, b in crop.get_flattened_data():
        if max(r, g, b) - min(r, g, b) > 80 and not (r > 230 and g > 140 and b > 140):
            n += 1
    return n


def test_a_real_browser_renders_the_report_and_every_chart_has_marks(report):
    binary = find_chromium()
    if binary is None:
        pytest.fail(MISSING)
    from io import BytesIO

    from PIL import Image

    browser = Chromium(binary)
    try:
        browser.open(report.resolve().as_uri())
        charts = browser.evaluate(
            "[...document.querySelectorAll('img.chart')].map(i => {const r = i.getBoundingClientRect();"
            " return {alt: i.alt, x: r.x + scrollX, y: r.y + scrollY, w: r.width, h: r.height, loaded: i.complete && "
            "i.naturalWidth > 0}})"
        )
        shot = browser.screenshot()
        errors = browser.errors()
    finally:
        browser.close()
    (report.parent / "screenshot.png").write_bytes(shot)
    assert errors == []
    assert {c["alt"] for c in charts} == {f"timeline of {g}" for g in DETAILED}
    assert all(c["loaded"] and c["w"] > 300 and c["h"] > 100 for c in charts), charts
    img = Image.open(BytesIO(shot))
    marks = {
        c["alt"]: mark_pixels(img, (int(c["x"]), int(c["y"]), int(c["x"] + c["w"]), int(c["y"] + c["h"])))
        for c in charts
    }
    assert all(n > 150 for n in marks.values()), sorted(marks.items(), key=lambda kv: kv[1])
