"""A non-editable install (the Docker image, `pip install .`) holds every top-level module the product
imports: clock.py was left out once and the compose stack's broker died with ModuleNotFoundError."""

from __future__ import annotations

import tomllib
from pathlib import Path

from tests.unit.test_layout import TOP_MODULES

ROOT = Path(__file__).resolve().parents[2]


def test_every_top_level_module_is_packaged_and_copied_into_the_image():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert set(project["tool"]["setuptools"]["py-modules"]) == set(TOP_MODULES)
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    copied = next(line for line in dockerfile.splitlines() if line.startswith("COPY pyproject.toml"))
    for module in TOP_MODULES:
        assert f" {module}.py " in copied + " ", f"docker/Dockerfile does not copy {module}.py"
