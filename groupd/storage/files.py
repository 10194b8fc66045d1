"""Small state files rewritten whole: the topic registry, the producer-id block, client quotas.

A restart must find exactly what was acknowledged, so a change is written to a temporary file,
synced, renamed over the old one, and the directory synced (a crash leaves the old or the new file,
never a torn one).
"""

from __future__ import annotations

import os
from pathlib import Path

from groupd.storage.log import fsync_directory


def write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_directory(path.parent)
