"""Rewrite README's two generated tables (supported APIs, configuration keys) from the code.

Run from the repository root after changing protocol/api_table.py or broker/config.py:
`.venv/bin/python scripts/readme_tables.py`. tests/unit check that the README matches.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from broker.config import config_table_markdown  # noqa: E402
from protocol.api_table import support_table_markdown  # noqa: E402

TABLES = (("| API | key | versions |", support_table_markdown), ("| key | default | meaning |", config_table_markdown))


def rewrite(readme: str) -> str:
    for header, table in TABLES:
        lines = readme[readme.index(header) :].split("\n")
        n = 0
        while n < len(lines) and lines[n].startswith("|"):
            n += 1
        readme = readme.replace("\n".join(lines[:n]), table().strip("\n"), 1)
    return readme


if __name__ == "__main__":
    path = ROOT / "README.md"
    path.write_text(rewrite(path.read_text()))
