"""A non-editable install (the Docker image, `pip install .`) holds the one package, groupd, and nothing
else at top level: clock.py was left out once and the compose stack's broker died with
ModuleNotFoundError; before groupd was one package, `pip install .` put `tools`, `protocol` and
`server` into site-packages beside the user's own modules."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_only_the_groupd_package_is_packaged_and_the_image_copies_it():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    setuptools = project["tool"]["setuptools"]
    assert "py-modules" not in setuptools
    assert setuptools["packages"]["find"]["include"] == ["groupd", "groupd.*"]
    for script, target in project["project"]["scripts"].items():
        assert target.startswith("groupd."), (script, target)
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert "COPY groupd /src/groupd" in dockerfile


def test_the_wheel_holds_groupd_alone_at_top_level(tmp_path):
    """Built as `pip install .` builds it: every file of the wheel is under groupd/ or its metadata. The
    build runs on a copy of what the build reads, so no build/ directory is left in the checkout."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "groupd", source / "groupd", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
        check=True, capture_output=True, timeout=300,
    )
    (wheel,) = tmp_path.glob("groupd-*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"groupd"}
