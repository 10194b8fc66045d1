"""A non-editable install (the Docker image, `pip install .`) holds the one package, groupd, and nothing
else at top level: clock.py was left out once and the compose stack's broker died with
ModuleNotFoundError; before groupd was one package, `pip install .` put `tools`, `protocol` and
`server` into site-packages beside the user's own modules.

And the wheel `python -m build` makes, installed into a fresh virtual environment, works with groupd's
runtime dependencies alone: `groupd --help`, `import groupd` and the pytest fixture (issue 41). The
build runs without isolation (the test extra brings build and setuptools), and the fresh environment
gets its dependencies without the registry: the wheel is installed with --no-deps, and a .pth file
puts a directory of links to the runtime dependencies' own files (their closure, read from this
environment's metadata) on its path, and nothing else, so a module the runtime dependencies do not
bring fails the test as it would fail a user."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import groupd

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


def runtime_closure(requirements: list[str]) -> set[str]:
    """The distributions these requirements bring, with theirs, as this environment resolved them."""
    found: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = importlib.metadata.distribution(req.name).metadata["Name"]
        if name in found:
            continue
        found.add(name)
        todo += [Requirement(r) for r in importlib.metadata.requires(name) or []]
    return found


def link_distributions(names: set[str], into: Path) -> None:
    """Links to each distribution's top-level files (packages, modules, .dist-info) in ``into``."""
    into.mkdir()
    for name in names:
        dist = importlib.metadata.distribution(name)
        base = Path(str(dist.locate_file("")))
        for top in {Path(str(f)).parts[0] for f in dist.files or []}:
            if top.startswith("..") or top == "__pycache__" or (into / top).exists():
                continue  # scripts live outside site-packages
            if (base / top).exists():
                (into / top).symlink_to(base / top)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "groupd", source / "groupd", ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(source)],
        check=True, capture_output=True, timeout=300,
    )
    (built,) = dist.glob("groupd-*.whl")
    return built


def test_the_wheel_holds_groupd_alone_at_top_level(wheel: Path):
    """Built as `python -m build` builds it, from a copy of what the build reads (no build/ directory is
    left in the checkout): every file of the wheel is under groupd/ or its metadata."""
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"groupd"}


def test_the_wheels_version_requirements_and_entry_points(wheel: Path):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert wheel.name == f"groupd-{groupd.__version__}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as z:
        info = f"groupd-{groupd.__version__}.dist-info"
        metadata = z.read(f"{info}/METADATA").decode()
        entry_points = z.read(f"{info}/entry_points.txt").decode()
    required = [line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Requires-Dist: ")]
    runtime = [r for r in required if "extra ==" not in r]
    assert runtime == project["project"]["dependencies"]  # extras (test, pipeline) are never installed by default
    assert "[pytest11]\ngroupd = groupd.testing.plugin" in entry_points
    assert "groupd = groupd.server:main" in entry_points


def test_installed_in_a_fresh_venv_it_runs_with_its_runtime_dependencies_alone(wheel: Path, tmp_path: Path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                       check=True, capture_output=True, text=True).stdout.strip()
    )
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = tmp_path / "deps"
    # the fixture needs pytest too: the user's test run brings it, groupd does not
    link_distributions(runtime_closure(project["dependencies"]) | runtime_closure(["pytest"]), deps)
    (site / "runtime-deps.pth").write_text(f"{deps}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    work = tmp_path / "project"  # a user's project: nothing of this checkout on its path (nor its egg-info)
    work.mkdir()
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        check=True, capture_output=True, timeout=300, cwd=work, env=env,
    )

    def run(*args: str | Path) -> str:
        done = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    assert "--override KEY=VALUE" in run(env_dir / "bin" / "groupd", "--help")
    where = run(python, "-c", "import groupd; print(groupd.__version__, groupd.__file__)")
    assert where.startswith(groupd.__version__) and str(site) in where
    (work / "test_app.py").write_text(
        "from kafka import KafkaProducer\n"
        "def test_produce(groupd_broker, groupd_names):\n"
        "    producer = KafkaProducer(bootstrap_servers=groupd_broker.bootstrap_servers)\n"
        "    producer.send(groupd_names.topic(), b'hello').get(10)\n"
        "    producer.close()\n"
    )
    assert "1 passed" in run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_app.py")
