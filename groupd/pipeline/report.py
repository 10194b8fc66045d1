"""The operator's report: one self-contained HTML file, read top to bottom.

Header (store, time span, when generated, counts), what the store cannot tell (once), groups at a glance
(state, Burrow status coloured with the rule that fired, lag now, new generations, last storm), removed
groups (once, with when), then one section per group needing attention: a chart of its generations
(members, causes, static restarts, storms shaded), its lag per topic over time and its commit rate on one
time axis, and its generations as a table.

Charts are matplotlib PNGs inlined as base64: no JavaScript, no server, no network, so the file opens
anywhere offline and prints as it shows. Every number goes through the formatters below: integers with
thousands separators, durations in s/min/h, times in UTC, "—" for nothing (never NaN or 4.0).
"""

from __future__ import annotations

import base64
import html
import io
import math
from datetime import UTC, datetime
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

NOTHING = "—"
STATUS_COLOURS = {"OK": "#1a7f37", "WARN": "#9a6700", "STOP": "#cf222e", "STALL": "#cf222e", "REWIND": "#cf222e"}
CAUSE_COLOURS = {
    "group formed": "#2da44e", "join": "#0969da", "leave or session expiry": "#cf222e", "member replaced": "#8250df",
    "rejoin (metadata change)": "#bf8700", "emptied": "#57606a",
}
STORM_COLOUR = "#ffb3b3"
TABLE_ROWS = 30
GLANCE_ROWS = 500


# ------------------------------------------------------------------------------------------ formatting

def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NaT


def fmt_int(v: Any) -> str:
    return NOTHING if _missing(v) else f"{int(v):,}"


def fmt_time(ms: Any) -> str:
    if _missing(ms):
        return NOTHING
    return datetime.fromtimestamp(int(ms) / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S")


def fmt_duration(ms: Any) -> str:
    if _missing(ms):
        return NOTHING
    s = int(ms) / 1000
    if s < 60:
        return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"
    if s < 3600:
        return f"{int(s // 60)} min {int(s % 60):02d} s"
    if s < 86_400:
        return f"{int(s // 3600)} h {int(s % 3600 // 60):02d} min"
    return f"{int(s // 86_400)} d {int(s % 86_400 // 3600):02d} h"


def fmt_names(v: Any, limit: int = 4) -> str:
    names = [] if _missing(v) else list(v)
    if not names:
        return NOTHING
    shown = ", ".join(str(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def esc(v: Any) -> str:
    return html.escape(NOTHING if _missing(v) else str(v))


def _table(headers: list[str], rows: list[list[str]], cls: str = "") -> str:
    """Cells are HTML already (escaped by the caller)."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table class='{cls}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _badge(status: Any) -> str:
    if _missing(status):
        return f"<span class='muted'>{NOTHING}</span>"
    colour = STATUS_COLOURS.get(str(status), "#57606a")
    return f"<span class='badge' style='background:{colour}'>{esc(status)}</span>"


def _anchor(group: str) -> str:
    return "g-" + "".join(ch if ch.isalnum() else "-" for ch in group)


# ------------------------------------------------------------------------------------------ charts

def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _dt(ms) -> Any:
    return pd.to_datetime(ms, unit="ms")


def group_chart(group: str, gens: pd.DataFrame, storms: pd.DataFrame, lag: pd.DataFrame | None,
                rate: pd.DataFrame, span: tuple[int, int]) -> str | None:
    """One figure, panels on one time axis: generations (members, causes, static restarts, storms shaded),
    lag per topic, commits per minute. Panels without data are left out; None when none has any."""
    panels = []
    if len(gens):
        panels.append("gens")
    if lag is not None and len(lag):
        panels.append("lag")
    if len(rate):
        panels.append("rate")
    if not panels:
        return None
    heights = {"gens": 2.2, "lag": 1.8, "rate": 1.3}
    fig, grid = plt.subplots(len(panels), 1, figsize=(10, sum(heights[p] for p in panels) + 0.4), sharex=True,
                             gridspec_kw={"height_ratios": [heights[p] for p in panels]}, squeeze=False)
    axes: dict[str, Axes] = {p: grid[i][0] for i, p in enumerate(panels)}
    hi = _dt(span[1])
    for ax in axes.values():
        ax.yaxis.set_major_locator(MaxNLocator(integer=True, nbins=5))
        for s in storms.itertuples():
            ax.axvspan(
                _dt(s.storm_start_ms),
                _dt(max(s.storm_end_ms, s.storm_start_ms + 1_000)),
                color=STORM_COLOUR,
                alpha=0.6,
                lw=0,
            )
        ax.grid(True, axis="y", color="#e5e5e5")
        ax.spines[["top", "right"]].set_visible(False)
    if "gens" in axes:
        ax = axes["gens"]
        g = gens.sort_values(["incarnation", "generation"])
        xs = list(_dt(g["start_ms"])) + [hi]
        ys = list(g["member_count"]) + [g["member_count"].iloc[-1]]
        ax.step(xs, ys, where="post", color="#0a7ea4", lw=1.4, label="members")
        for cause, rows in g.groupby("likely_cause"):
            ax.scatter(
                _dt(rows["start_ms"]),
                rows["member_count"],
                s=36,
                zorder=3,
                color=CAUSE_COLOURS.get(cause, "#57606a"),
                label=f"new generation: {cause}",
            )
        restarts = [
            (r["at_ms"], n)
            for lst, n in zip(g["static_restarts"], g["member_count"], strict=False)
            for r in (lst if not _missing(lst) else [])
        ]
        if restarts:
            ax.scatter(
                _dt([r[0] for r in restarts]),
                [r[1] for r in restarts],
                marker="x",
                s=60,
                color="#8250df",
                zorder=4,
                label="static member restarted (no rebalance)",
            )
        handles, labels = ax.get_legend_handles_labels()
        if len(storms):
            handles.append(Patch(color=STORM_COLOUR, alpha=0.6))
            labels.append(f"storm (many new generations in {int(storms['window_seconds'].iloc[0])} s)")
        ax.set_ylabel("members")
        ax.set_ylim(bottom=0, top=max(1, int(g["member_count"].max())) * 1.25 + 0.5)
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    if "lag" in axes:
        assert lag is not None  # its panel is there only when it has rows
        ax = axes["lag"]
        for topic, rows in lag.sort_values("t_ms").groupby("topic"):
            ax.step(
                list(_dt(rows["t_ms"])) + [hi],
                list(rows["lag"]) + [rows["lag"].iloc[-1]],
                where="post",
                lw=1.5,
                label=f"lag on {topic}",
            )
        ax.set_ylabel("lag (records)")
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    if "rate" in axes:
        ax = axes["rate"]
        ax.bar(
            _dt(rate["bucket_ms"] + 30_000),
            rate["commits"],
            width=50 / 86_400,
            color="#0969da",
            label="offset commits per minute",
        )
        ax.set_ylabel("commits / min")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    last = axes[panels[-1]]
    pad = max((span[1] - span[0]) * 0.02, 1_000)
    last.set_xlim(_dt(span[0] - pad), _dt(span[1] + pad))
    last.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
    last.set_xlabel("time (UTC)")
    axes[panels[0]].set_title(group, loc="left", fontsize=11)
    return _png(fig)


# ------------------------------------------------------------------------------------------ sections


def _header(meta: dict) -> str:
    n = meta["counts"]
    a, b = meta["span_ms"]
    rows = [
        ("Store", esc(meta["store"])),
        ("Time span", f"{fmt_time(a)} to {fmt_time(b)} UTC ({fmt_duration(None if _missing(a) else b - a)})"),
        ("Generated", f"{fmt_time(meta['generated_ms'])} UTC; statuses evaluated at {fmt_time(meta['now_ms'])} UTC"),
        ("Groups", f"{fmt_int(n['groups'])} live, {fmt_int(n['removed'])} deleted or expired"),
        (
            "Records",
            f"{fmt_int(n['generations'])} generations, {fmt_int(n['commit_records'])} offset-commit records, "
            f"{fmt_int(n['log_end_samples'])} log-end samples",
        ),
    ]
    return "<dl class='meta'>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _cannot_tell(meta: dict) -> str:
    items = []
    if not meta["has_history"]:
        items.append(
            "<b>Lag over time and Burrow's WARN.</b> This store holds no log-end history (the broker records it every "
            "<code>log.end.history.interval.ms</code> into <code>log.dirs/log-end-history</code>), so lag at each "
            "commit is measured against today's log end: WARN (lag never decreasing) cannot show, and no "
            "lag-over-time chart is drawn."
        )
    items += [
        "<b>How long a rebalance took.</b> A generation's record is written when its sync completes; when the "
        "rebalance began (the first JoinGroup) is not stored. The tables give when each generation started, how long "
        "it lasted and the time since the one before.",
        "<b>Why a member left.</b> A LeaveGroup and a session expiry write the same record: both read "
        "&ldquo;leave or session expiry&rdquo;.",
        "<b>History thinned by compaction.</b> Closed segments of <code>__consumer_offsets</code> keep only the "
        "newest record per key, so generations and commits older than the active segment collapse to their last value "
        "unless the broker keeps them (<code>offsets.retain.uncompacted.hours</code>).",
        "<b>Deleted or expired.</b> A group whose offsets all expired and whose record was never tombstoned reads "
        "&ldquo;offsets expired or deleted&rdquo;.",
    ]
    return "<h2>What the store cannot tell</h2><ul class='cannot'>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _state(row: Any) -> str:
    if row.state == "Stable":
        word = "epoch" if row.group_type == "consumer" else "generation"
        return (
            f"Stable, {fmt_int(row.members_now)} member{'s' if row.members_now != 1 else ''}, "
            f"{word} {fmt_int(row.generation_now)}"
        )
    if row.state == "Empty":
        return f"Empty since {fmt_time(row.last_rebalance_ms)}"
    return esc(row.state)


def _glance(overview: pd.DataFrame, detailed: set[str], meta: dict) -> str:
    rows = []
    for r in overview.head(GLANCE_ROWS).itertuples():
        name = f"<a href='#{_anchor(r.group)}'>{esc(r.group)}</a>" if r.group in detailed else esc(r.group)
        if _missing(r.burrow):
            burrow = f"{_badge(None)} <span class='muted'>no offsets committed</span>"
        else:
            more = (
                f" <span class='muted'>(+{int(r.partitions_not_ok) - 1} more partitions not OK)</span>"
                if r.partitions_not_ok > 1
                else ""
            )
            burrow = f"{_badge(r.burrow)} {esc(r.burrow_rule)}{more}"
        storm = (
            NOTHING
            if _missing(r.last_storm_ms)
            else f"{fmt_time(r.last_storm_ms)} (peak {fmt_int(r.storm_peak)} in {meta['storm_window']} s)"
        )
        rows.append(
            [
                name,
                esc(r.group_type),
                _state(r),
                burrow,
                fmt_int(r.lag_now),
                fmt_int(r.generations),
                fmt_int(r.static_restarts),
                storm,
                fmt_time(r.last_commit_ms),
            ]
        )
    storms = sum(1 for r in overview.itertuples() if not _missing(r.last_storm_ms))
    note = (
        f"<p>A storm is {meta['storm_min']} or more new generations within {meta['storm_window']} s. "
        + ("No group had one in this span." if storms == 0 else f"{storms} group{'s' if storms != 1 else ''} had one.")
        + " Burrow's statuses: <span class='badge' style='background:#1a7f37'>OK</span> "
        "<span class='badge' style='background:#9a6700'>WARN</span> lag growing; <span class='badge' "
        "style='background:#cf222e'>STOP</span> <span class='badge' style='background:#cf222e'>STALL</span> <span "
        "class='badge' style='background:#cf222e'>REWIND</span> consumer in trouble. Each names the partition and the "
        "rule that fired.</p>"
    )
    left_out = len(overview) - len(rows)
    tail = (
        (
            f"<p class='muted'>{left_out:,} more groups, each needing attention less than the last one listed, are "
            "left out here; <code>python -m groupd.pipeline overview</code> lists every group.</p>"
        )
        if left_out > 0
        else ""
    )
    return (
        "<h2>Groups at a glance</h2>"
        + note
        + _table(
            [
                "Group",
                "Kind",
                "State",
                "Burrow status (worst partition: rule that fired)",
                "Lag now",
                "Generations",
                "Static restarts",
                "Last storm",
                "Last commit",
            ],
            rows,
            "glance",
        )
        + tail
    )


def _removed(removed: pd.DataFrame) -> str:
    if not len(removed):
        return ""
    rows = [
        [esc(r.group), f"{fmt_time(r.removed_ms)} UTC", esc(r.how)]
        for r in removed.sort_values("removed_ms").itertuples()
    ]
    return "<h2>Deleted or expired groups</h2><p>Shown here once; they appear in no other table.</p>" + _table(
        ["Group", "Removed at", "How"], rows, "removed"
    )


def _generations_table(gens: pd.DataFrame) -> str:
    g = gens.sort_values(["incarnation", "generation"])
    hidden = max(0, len(g) - TABLE_ROWS)
    rows = []
    for r in g.tail(TABLE_ROWS).itertuples():
        restarts = [] if _missing(r.static_restarts) else list(r.static_restarts)
        note = "; ".join(
            f"static member {fmt_names(x['instances'])} restarted at {fmt_time(x['at_ms'])}" for x in restarts
        )
        lasted = (
            fmt_duration(r.duration_ms) if not _missing(r.duration_ms) else ("current" if r.member_count else NOTHING)
        )
        rows.append(
            [
                fmt_int(r.generation),
                fmt_time(r.start_ms),
                fmt_duration(r.rebalance_ms),
                lasted,
                fmt_int(r.member_count),
                fmt_names(r.joined),
                fmt_names(r.left),
                f"<span style='color:{CAUSE_COLOURS.get(r.likely_cause, '#57606a')}'>&#9679;</span> "
                f"{esc(r.likely_cause)}"
                + (f"<br><span class='muted'>{esc(note)}</span>" if note else ""),
            ]
        )
    word = "epoch" if (g["group_type"] == "consumer").all() else "generation"
    more = f"<p class='muted'>{hidden:,} earlier {word}s not listed.</p>" if hidden else ""
    return more + _table(
        [word.capitalize(), "Started (UTC)", "Since previous", "Lasted", "Members", "Joined", "Left", "Likely cause"],
        rows,
        "gens",
    )


def _group_section(row: Any, frames: dict, span: tuple[int, int]) -> str:
    group = row.group
    gens = frames["history"][frames["history"]["group"] == group]
    storms = frames["storms"][frames["storms"]["group"] == group]
    lag = frames["lag_timeline"]
    lag = None if lag is None else lag[lag["group"] == group]
    rate = frames["commit_rate"][frames["commit_rate"]["group"] == group]
    status = frames["status"][frames["status"]["group"] == group]
    parts = [f"<section id='{_anchor(group)}'><h3>{esc(group)} <span class='muted'>({esc(row.group_type)})</span></h3>"]
    facts = [_state(row)]
    if not _missing(row.burrow):
        facts.append(f"Burrow {_badge(row.burrow)} {esc(row.burrow_rule)}")
    if len(storms):
        facts.append(
            "storm"
            + ("s" if len(storms) > 1 else "")
            + " "
            + "; ".join(
                f"{fmt_time(s.storm_start_ms)} to {fmt_time(s.storm_end_ms)} (peak {fmt_int(s.peak_in_window)} new "
                f"generations in {int(s.window_seconds)} s)"
                for s in storms.itertuples()
            )
        )
    parts.append("<p>" + " · ".join(facts) + "</p>")
    png = group_chart(group, gens, storms, lag, rate, span)
    if png is not None:
        parts.append(f"<img class='chart' alt='timeline of {esc(group)}' src='data:image/png;base64,{png}'/>")
    if len(gens):
        parts.append(_generations_table(gens))
    if len(status) > 1 or (len(status) == 1 and status["status"].iloc[0] != "OK"):
        rows = [
            [esc(f"{s.topic}-{s.partition}"), _badge(s.status), esc(s.rule), fmt_int(s.lag), fmt_int(s.last_offset)]
            for s in status.sort_values(["topic", "partition"]).itertuples()
        ]
        parts.append(
            "<details><summary>Burrow status per partition</summary>"
            + _table(["Partition", "Status", "Rule that fired", "Lag now", "Last committed offset"], rows)
            + "</details>"
        )
    parts.append("</section>")
    return "".join(parts)


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:1.5em 2em;color:#24292f;max-width:1300px}
h1{font-size:1.5em;margin-bottom:.2em}h2{border-bottom:1px solid #d0d7de;padding-bottom:.2em;margin-top:1.6em}
h3{margin-top:1.8em}dl.meta{display:grid;grid-template-columns:max-content auto;gap:.2em 1em}\
dt{font-weight:600}dd{margin:0}
table{border-collapse:collapse;font-size:.9em;margin:.5em 0}th,td{padding:3px 8px;border-bottom:1px solid #eaeef2;
text-align:left;vertical-align:top}th{background:#f6f8fa}td:nth-child(n+5){font-variant-numeric:tabular-nums}
.badge{color:#fff;border-radius:3px;padding:0 5px;font-weight:600;font-size:.85em}.muted{color:#57606a}
ul.cannot li{margin:.3em 0}img.chart{max-width:100%;display:block;margin:.5em 0}
"""


def render(frames: dict) -> str:
    meta = frames["meta"]
    overview = frames["overview"]
    detailed_rows = [r for r in overview.itertuples()][: meta["detail_groups"]]
    detailed = {r.group for r in detailed_rows}
    a, b = meta["span_ms"]
    span = (a if not _missing(a) else meta["now_ms"], max(b if not _missing(b) else meta["now_ms"], meta["now_ms"]))
    sections = "".join(_group_section(r, frames, span) for r in detailed_rows)
    left_out = len(overview) - len(detailed)
    per_group = (
        "<h2>Group by group</h2><p>The groups needing attention first"
        + (f"; {left_out:,} more are in the table above only." if left_out else ".")
        + "</p>"
        + sections
    )
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>groupd: what did the groups do?</title>"
        f"<style>{CSS}</style></head><body><h1>groupd: what did the consumer groups do?</h1>"
        + _header(meta)
        + _cannot_tell(meta)
        + _glance(overview, detailed, meta)
        + _removed(frames["removed"])
        + per_group
        + "</body></html>"
    )
