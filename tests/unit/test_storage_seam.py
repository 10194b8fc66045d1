"""Every durable write goes through the storage seam (groupd/storage/engine.py): outside groupd/storage/,
no module imports the local engine's internals, only the seam. A second engine (issue 37) then replaces
the local one by implementing the seam, without touching the coordinators, the data plane or handlers.

The seam is ``engine`` (the Protocols), ``errors`` (the typed errors it documents), Kafka's record
format, which every engine stores byte for byte (``batch``, ``codecs``, ``message_sets``),
``logdirfailure`` (where any engine reports a storage failure the broker must stop on), and
``shared_document`` (a metadata document cluster nodes change by compare-and-set, whatever the engine). Two places may
reach past it, on purpose:

- the wiring, groupd/broker/app.py, which builds the engine ``storage.engine`` names through the
  registry, groupd/storage/engines.py (part of the seam: a name per engine, nothing of any engine's);
- groupd/testing/broker.py, which starts brokers for other projects' tests and owns their data's
  lifetime: it forgets a memory engine's store (storage/memory.py ``discard``) when its broker stops;
- groupd/pipeline/, the offline analytics job, which reads the local engine's segment files directly
  from log.dirs with no broker running (that is its point);
- groupd/cluster/ and its wiring, groupd/broker/clustering.py: several nodes over one PostgreSQL keep
  their nodes and leases in that database and set the PostgreSQL engine's fence (docs/cluster.md), so
  they may import the PostgreSQL engine's modules, and no other engine's.

Annotation-only imports (``if TYPE_CHECKING:``) count too: typing a caller on ``Log`` ties it to the
local engine as much as calling it.
"""

from __future__ import annotations

import ast

from tests.unit.test_layout import module_name, product_files

SEAM = {
    "groupd.storage",
    "groupd.storage.engine",
    "groupd.storage.engines",
    "groupd.storage.errors",
    "groupd.storage.batch",
    "groupd.storage.codecs",
    "groupd.storage.message_sets",
    "groupd.storage.logdirfailure",
    "groupd.storage.shared_document",
}
WIRING = {"groupd.broker.app", "groupd.testing.broker"}
OFFLINE_READERS = "groupd.pipeline"
CLUSTER = ("groupd.cluster", "groupd.broker.clustering")  # may import the PostgreSQL engine's modules


def storage_imports(tree: ast.AST) -> set[str]:
    """Every groupd.storage module a module imports, anywhere in it (functions and TYPE_CHECKING too)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("groupd.storage")}
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.startswith("groupd.storage")
        ):
            if node.module == "groupd.storage":
                found |= {f"groupd.storage.{a.name}" for a in node.names}
            else:
                found.add(node.module)
    return found


def test_only_the_seam_is_imported_outside_storage():
    wrong = []
    for path in product_files():
        name = module_name(path)
        if name.startswith("groupd.storage") or name in WIRING or name.startswith(OFFLINE_READERS):
            continue
        for imported in sorted(storage_imports(ast.parse(path.read_text())) - SEAM):
            if name.startswith(CLUSTER) and imported.startswith("groupd.storage.postgresql"):
                continue
            wrong.append(f"{name} imports {imported}")
    assert not wrong, "go through groupd/storage/engine.py instead:\n" + "\n".join(wrong)


def test_the_check_sees_a_reach_past_the_seam():
    tree = ast.parse(
        "from groupd.storage.log import Log\nfrom groupd.storage import files\n"
        "if TYPE_CHECKING:\n    from groupd.storage.committer import GroupCommitter\n"
        "def f():\n    import groupd.storage.journal\n"
    )
    assert storage_imports(tree) - SEAM == {
        "groupd.storage.log",
        "groupd.storage.files",
        "groupd.storage.committer",
        "groupd.storage.journal",
    }
    assert not storage_imports(ast.parse("from groupd.storage.engine import PartitionLog\n")) - SEAM


def test_no_module_outside_storage_names_an_engine():
    """The engine is chosen by name (``storage.engine``) in storage/engines.py, so no module outside
    storage/ imports one: a new engine registers there and nothing else changes."""
    choosing = sorted(
        module_name(path)
        for path in product_files()
        if not module_name(path).startswith("groupd.storage")
        and "groupd.storage.local" in storage_imports(ast.parse(path.read_text()))
    )
    assert choosing == []
