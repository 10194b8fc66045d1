"""bench/engines.py's table: local and postgresql side by side with their ratio, and a column that could
not be measured says why (issue 37's engine column of ``make bench``)."""

from bench import engines
from bench.run import markdown


def results(scale: float) -> dict:
    return {
        key: {metric: round(100.0 * scale * (i + 1), 1) for _k, metric, _label in engines.ROWS if _k == key}
        for i, key in enumerate(dict.fromkeys(k for k, _m, _l in engines.ROWS))
    }


def test_every_measure_has_a_row_with_both_engines_and_their_ratio():
    table = engines.markdown({"local": results(1.0), "postgresql": results(0.5)})
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert [r.split(" | ")[0][2:] for r in rows] == [label for _k, _m, label in engines.ROWS]
    assert all(r.endswith("| 0.50x |") for r in rows)


def test_an_engine_not_measured_says_why():
    table = engines.markdown({"local": results(1.0), "postgresql": {"error": "PostgreSQL's binaries are missing"}})
    assert "| produce MB/s, 1 partition | 100.0 | n/a |  |" in table
    assert table.rstrip().endswith("postgresql not measured: PostgreSQL's binaries are missing")


def test_the_bench_report_carries_the_engines_table():
    report = markdown(
        {"date": "d", "machine": "m", "targets": [], "engines": {"local": results(1.0), "postgresql": results(2.0)}}
    )
    assert "| commits/s, 64 committers |" in report and "2.00x" in report
    assert "engines not measured: no python" in markdown(
        {"date": "d", "machine": "m", "targets": [], "engines": {"error": "no python"}}
    )
