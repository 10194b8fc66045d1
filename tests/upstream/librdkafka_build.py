"""librdkafka's own test runner, built from the source bundled in a pinned npm package, cached in build/.

Debian's librdkafka is too old for the consumer group protocol (KIP-848), and librdkafka's release
archives come from a host that is not a package registry; the npm package
``@confluentinc/kafka-javascript`` ships librdkafka's complete source tree, ``tests/`` included, under
``deps/librdkafka``. It is fetched with ``npm pack`` (the pinned version), and only that tree is
extracted.

The build keeps to what the machine has: ``./configure --no-download`` with every optional
dependency off (no SSL, SASL/GSSAPI, curl, zstd, zlib, external lz4), then the C library, the C++
wrapper (its tests link it) and ``tests/test-runner``. The runner is linked from the test files of
the selection only: every other test's entry point is a generated stub that fails if it is ever run,
which saves compiling some two hundred files nobody runs here. Builders on two workers take a file
lock, so one builds and the other waits for it.
"""

from __future__ import annotations

import fcntl
import re
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / "build" / "upstream"
NPM_PACKAGE = "@confluentinc/kafka-javascript"
NPM_VERSION = "1.10.1"
LIBRDKAFKA_VERSION = "2.15.1"  # what that package bundles (RD_KAFKA_VERSION 0x020f01ff)
CONFIGURE = ["--no-download", "--disable-ssl", "--disable-gssapi", "--disable-curl", "--disable-zstd",
             "--disable-zlib", "--disable-lz4-ext", "--disable-syslog"]
TIMEOUT = 900  # seconds for any one step


class BuildUnavailable(Exception):
    """The package could not be fetched or the runner could not be built here (the test skips, saying why)."""


def _run(args: list[str], cwd: Path, log: Path) -> None:
    with open(log, "ab") as out:
        out.write(f"$ {' '.join(args)}\n".encode())
        out.flush()
        try:
            done = subprocess.run(args, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, timeout=TIMEOUT)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise BuildUnavailable(f"{' '.join(args[:3])}: {e}") from e
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise BuildUnavailable(f"{' '.join(args[:3])} exited with {done.returncode} (log {log}):\n{tail}")


def _source(log: Path) -> Path:
    """The extracted librdkafka tree (``deps/librdkafka`` of the npm package), fetched once."""
    tree = CACHE / f"librdkafka-{LIBRDKAFKA_VERSION}"
    if (tree / "configure").is_file():
        return tree
    tarball = CACHE / f"confluentinc-kafka-javascript-{NPM_VERSION}.tgz"
    if not tarball.is_file():
        _run(["npm", "pack", "--silent", f"{NPM_PACKAGE}@{NPM_VERSION}", "--pack-destination", str(CACHE)], CACHE, log)
    prefix = "package/deps/librdkafka/"
    staging = CACHE / f"librdkafka-{LIBRDKAFKA_VERSION}.partial"
    subprocess.run(["rm", "-rf", str(staging)], check=True)
    staging.mkdir()
    try:
        with tarfile.open(tarball) as tar:
            members = []
            for member in tar.getmembers():
                if member.name.startswith(prefix):
                    member.name = member.name[len(prefix):]
                    members.append(member)
            if not members:
                raise BuildUnavailable(f"{tarball.name} holds no {prefix}")
            tar.extractall(staging, members=members, filter="data")
    except (tarfile.TarError, OSError) as e:
        tarball.unlink(missing_ok=True)  # fetched again next time
        raise BuildUnavailable(f"{tarball.name}: {e}") from e
    for script in ("configure", "lds-gen.py", "tests/run-test.sh"):
        (staging / script).chmod(0o755)
    staging.rename(tree)
    return tree


def _entry_points(source: str) -> list[str]:
    return re.findall(r"^int\s+main_(\w+)\s*\(", source, re.MULTILINE)


def _stubs(tests: Path, built: list[str]) -> str:
    """C source defining every test entry point test.c declares that the built files do not."""
    declared = re.findall(r"^_TEST_DECL\((\w+)\);", (tests / "test.c").read_text(), re.MULTILINE)
    defined = {name for file in built for name in _entry_points((tests / file).read_text(errors="replace"))}
    lines = ['#include "test.h"', "/* generated: tests not built for groupd's selection */"]
    for name in declared:
        if name not in defined:
            lines.append(
                f'int main_{name}(int argc, char **argv) {{ TEST_FAIL("{name} is not built here"); return 1; }}'
            )
    return "\n".join(lines) + "\n"


def test_files(tests: Path, numbers: list[str]) -> list[str]:
    """The test source files (``0018-cgrp_term.c``, ``0113-....cpp``) of these test numbers."""
    files = sorted(p.name for n in numbers for p in tests.glob(f"{n}-*") if p.suffix in (".c", ".cpp"))
    missing = [n for n in numbers if not any(f.startswith(f"{n}-") for f in files)]
    if missing:
        raise BuildUnavailable(f"librdkafka {LIBRDKAFKA_VERSION} has no test files for {missing}")
    return files


def build(numbers: list[str]) -> Path:
    """The librdkafka ``tests`` directory holding a ``test-runner`` with these tests built in."""
    CACHE.mkdir(parents=True, exist_ok=True)
    log = CACHE / "librdkafka-build.log"
    with open(CACHE / "librdkafka.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        tree = _source(log)
        tests = tree / "tests"
        files = test_files(tests, numbers)
        stamp = tests / "groupd-selection.txt"
        runner = tests / "test-runner"
        wanted = "\n".join(files) + "\n"
        if runner.is_file() and stamp.is_file() and stamp.read_text() == wanted:
            return tests
        if not (tree / "Makefile.config").is_file():
            _run(["./configure", *CONFIGURE], tree, log)
        _run(["make", "-j2", "-C", "src", "lib"], tree, log)
        _run(["make", "-j2", "-C", "src-cpp", "lib"], tree, log)
        (tests / "groupd_stubs.c").write_text(_stubs(tests, files))
        runner.unlink(missing_ok=True)
        c_files = " ".join([f for f in files if f.endswith(".c")] + ["groupd_stubs.c"])
        cpp_files = " ".join(f for f in files if f.endswith(".cpp"))
        _run(
            ["make", "-j2", "-C", "tests", "test-runner", f"TESTSRCS_C={c_files}", f"TESTSRCS_CXX={cpp_files}"],
            tree,
            log,
        )
        stamp.write_text(wanted)
        return tests
