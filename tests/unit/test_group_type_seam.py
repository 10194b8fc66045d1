"""The group-type seam, checked: outside each type's own package and the one registration, the
coordinator and the broker reach consumer (KIP-848) and share (KIP-932) groups only through the
protocol every type implements (groupd/coordinator/group_type.py), never by name.

Adding a group type (streams, say) touches:
- its own package, ``groupd/coordinator/<type>/``, with a ``group_type`` module holding its GroupType
  (state name, list entry, describe, delete, offset validation, API entry points, timers, replay of its
  records, re-arming after a load, unload) and whatever rules it needs;
- one line in ``groupd/coordinator/group_types.py`` (``GROUP_TYPES``), plus the names of the APIs of
  its own that the broker's handlers call there;
- its records' key and value schemas in the record codec (``groupd/coordinator/records.py`` reads the
  ``records`` module of each type package: the one other place a type is listed);
- the broker's handlers of its own APIs (their kio entities), which import only its ``api`` and
  ``config`` modules and reach its rules through ``group_types``.

Nothing else: not the shard (coordinator/shard.py dispatches by the group's class), not the offsets
manager (coordinator/offsets/ asks the owning type), not the service, metrics or observer.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COORDINATOR = ROOT / "groupd" / "coordinator"
BROKER = ROOT / "groupd" / "broker"

# the type packages other than classic (classic is the default type: offsets committed for an id no
# group holds make a simple classic group, as in Kafka, so the offsets manager may name it)
TYPE_PACKAGES = ("consumer", "share")
REGISTRATION = COORDINATOR / "group_types.py"
# a type package's published edges: its requests and answers, its configuration, its record schemas
EDGE_MODULES = frozenset(("api", "config", "records"))
# names that only a type's own package may use
TYPE_NAMES = frozenset((
    "consumer_groups", "share_groups", "ConsumerGroup", "ConsumerGroups", "ShareGroup", "ShareGroups",
))


def _outside_type_packages(folder: Path) -> list[Path]:
    own = tuple(COORDINATOR / p for p in TYPE_PACKAGES)
    return sorted(p for p in folder.rglob("*.py") if not p.is_relative_to(own[0]) and not p.is_relative_to(own[1])
                  and p != REGISTRATION)


def _is_state(node: ast.expr) -> bool:
    return (isinstance(node, ast.Name) and node.id == "state") or (
        isinstance(node, ast.Attribute) and node.attr == "state"
    )


def _violations(path: Path, strict: bool = True) -> list[str]:
    """Type-specific imports and names in ``path``. Not ``strict`` (the broker): its own modules and
    objects named after the APIs they serve (handlers/consumer_groups.py, the share-group shell
    ``broker.share_groups``) are fine; a shard state's type-specific maps and the types' classes are not."""
    tree = ast.parse(path.read_text())
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[:2] == ["groupd", "coordinator"] and len(parts) > 2 and parts[2] in TYPE_PACKAGES:
                modules = [parts[3]] if len(parts) > 3 else [alias.name for alias in node.names]
                for module in modules:
                    if module not in EDGE_MODULES:
                        found.append(f"{rel}:{node.lineno} imports {node.module}.{module}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                inside = parts[:2] == ["groupd", "coordinator"] and len(parts) > 2 and parts[2] in TYPE_PACKAGES
                if inside and (len(parts) < 4 or parts[3] not in EDGE_MODULES):
                    found.append(f"{rel}:{node.lineno} imports {alias.name}")
        elif isinstance(node, ast.Attribute) and node.attr in TYPE_NAMES:
            if strict or _is_state(node.value):
                found.append(f"{rel}:{node.lineno} uses .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in TYPE_NAMES and (strict or node.id[0].isupper()):
            found.append(f"{rel}:{node.lineno} names {node.id}")
    return found


def test_the_coordinator_names_no_group_type_outside_its_package_and_the_registration():
    found = [v for path in _outside_type_packages(COORDINATOR) for v in _violations(path)]
    assert found == []


def test_the_broker_reaches_group_types_only_through_the_coordinator_seam():
    found = [v for path in sorted(BROKER.rglob("*.py")) for v in _violations(path, strict=False)]
    assert found == []


def test_every_registered_type_implements_the_protocol():
    from groupd.coordinator.group_type import GroupType
    from groupd.coordinator.group_types import BY_CLASS, CREATORS, GROUP_TYPES

    assert len({t.name for t in GROUP_TYPES}) == len(GROUP_TYPES)
    assert len(BY_CLASS) == len(GROUP_TYPES)
    for t in GROUP_TYPES:
        assert isinstance(t, GroupType) and not getattr(t, "__abstractmethods__", None)
        assert set(t.creates) <= set(t.api)
    # every per-group API has a type that answers for an id no group of a serving type holds
    assert {"join_group", "sync_group", "heartbeat", "leave_group"} <= set(CREATORS)


def test_the_guard_sees_a_special_case(tmp_path):
    """The checker itself: a shard poking a type's map is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from groupd.coordinator.consumer.rules import x\n\ndef f(state):\n    return state.consumer_groups\n"
    )
    assert len(_violations(bad)) == 2
