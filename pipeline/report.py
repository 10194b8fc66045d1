"""One self-contained HTML report: figures drawn with matplotlib (static files, no JavaScript, no
server) and inlined as base64 PNG, so the report is a single file to mail or archive."""

from __future__ import annotations

import base64
import html
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def render(history: pd.DataFrame, storms: pd.DataFrame, lag: pd.DataFrame, status: pd.DataFrame, summary: pd.DataFrame) -> str:
    sections = []
    if not history.empty:
        fig, ax = plt.subplots(figsize=(9, 0.4 * max(len(history["group"].unique()), 3) + 1))
        for i, (_group, rows) in enumerate(history.groupby("group")):
            ax.scatter(pd.to_datetime(rows["start_ms"], unit="ms"), [i] * len(rows), s=12)
        ax.set_yticks(range(len(history["group"].unique())), sorted(history["group"].unique()))
        ax.set_title("Rebalances (new generations) over time per group")
        sections.append(("Rebalances over time", _png(fig)))
    if not storms.empty:
        fig, ax = plt.subplots(figsize=(9, 0.4 * len(storms) + 1))
        for i, row in enumerate(storms.itertuples()):
            start = pd.to_datetime(row.first_storm_start_ms, unit="ms")
            end = pd.to_datetime(row.last_storm_end_ms, unit="ms")
            ax.plot([start, end], [i, i], linewidth=6)
        ax.set_yticks(range(len(storms)), list(storms["group"]))
        ax.set_title("Rebalance storms")
        sections.append(("Storm timeline", _png(fig)))
    if not lag.empty:
        per_group = lag.groupby("group")["lag"].sum().sort_values()
        fig, ax = plt.subplots(figsize=(9, 0.4 * len(per_group) + 1))
        ax.barh(list(per_group.index), list(per_group.values))
        ax.set_title("Lag per group (messages)")
        sections.append(("Lag per group", _png(fig)))
    body = "".join(f"<h2>{html.escape(t)}</h2><img src='data:image/png;base64,{img}'/>" for t, img in sections)
    tables = "".join(
        f"<h2>{html.escape(name)}</h2>{df.to_html(index=False, border=0)}"
        for name, df in (("Summary", summary), ("Consumer status (Burrow's rules)", status), ("Storms", storms))
    )
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>groupd: what did the groups do?</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{padding:2px 8px}</style>"
        f"</head><body><h1>groupd: what did the groups do?</h1>{body}{tables}</body></html>"
    )
