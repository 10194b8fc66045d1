"""Rewrite the generated tables in one go: supported APIs (README.md), configuration keys
(docs/configuration.md), what each API needs from the authorizer (docs/security.md).

Run from the repository root after changing groupd/protocol/api_table.py or groupd/broker/config.py:
`.venv/bin/python scripts/readme_tables.py` (the same as `python -m groupd.protocol.api_table --write-readme`
and `python -m groupd.broker.config`). tests/unit check that both match.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from groupd.broker import config  # noqa: E402
from groupd.broker.security import api_checks  # noqa: E402
from groupd.protocol import api_table  # noqa: E402

if __name__ == "__main__":
    os.chdir(ROOT)
    api_table.write_readme()
    config.write_readme()
    api_checks.write_docs()
