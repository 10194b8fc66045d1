"""The shape of the code, checked: no folder holds more than a quarter of the product's lines, no product
module takes part in an import cycle, and the rooms import only downwards (protocol below storage and
the coordinator, storage knowing nothing of groups or the network)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "groupd"


def product_files() -> list[Path]:
    """Every module of the one package, groupd/ (the repository's bench/, tests/ and scripts/ are not
    the product)."""
    return sorted(PACKAGE.rglob("*.py"))


def room(module: str) -> str:
    """The room a module is in: ``groupd.coordinator.shard`` -> ``coordinator``; ``groupd.server`` ->
    ``server``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def folder_lines() -> dict[str, int]:
    """Lines per folder, each folder counting only its own files (a subfolder is a folder of its own)."""
    lines: dict[str, int] = {}
    for path in product_files():
        folder = path.parent.relative_to(ROOT).as_posix()
        lines[folder] = lines.get(folder, 0) + len(path.read_text().splitlines())
    return lines


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """Product modules that ``path`` imports when it runs (at its top or inside functions); imports
    under ``if TYPE_CHECKING:`` are annotations only and make no cycle."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if alias.name in modules:
                        found.add(alias.name)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                for alias in child.names:
                    sub = f"{child.module}.{alias.name}"
                    if sub in modules:
                        found.add(sub)
                    elif child.module in modules:
                        found.add(child.module)
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for p in product_files()}
    modules = set(files)
    return {name: runtime_imports(path, modules) - {name} for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = iter(range(1 << 30))

    def strongconnect(v: str) -> None:
        index[v] = low[v] = next(counter)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return found


def test_no_folder_holds_more_than_a_quarter_of_the_product():
    lines = folder_lines()
    total = sum(lines.values())
    too_big = {folder: f"{n / total:.0%}" for folder, n in lines.items() if n > total / 4}
    assert not too_big, f"folders above a quarter of {total} lines: {too_big}"


def test_no_import_cycles_among_product_modules():
    found = cycles(import_graph())
    assert not found, f"import cycles: {found}"


def test_the_cycle_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_rooms_import_downwards_only():
    graph = import_graph()
    forbidden = {
        "protocol": ("storage", "coordinator", "broker", "pipeline", "cli", "server"),
        "storage": ("coordinator", "broker", "pipeline", "cli", "server"),
        "coordinator": ("broker", "pipeline", "cli", "server"),
    }
    wrong = [
        f"{module} imports {target}"
        for module, targets in graph.items()
        for room_name, banned in forbidden.items()
        if room(module) == room_name
        for target in targets
        if room(target) in banned
    ]
    assert not wrong, wrong


BARE_API_NUMBER = re.compile(
    r"\b(?:call|request|nested|send|request_class|response_class|encode_request|encode_response|handles)\(\s*\d+\s*[,)]"
    r"|\bapi_key\s*(?:==|!=)\s*\d|^\s*(?:API_VERSIONS|HEARTBEAT|OFFSET_COMMIT|[A-Z_]+_KEY)\s*=\s*\d+\s*$"
)


def test_no_bare_api_numbers_outside_the_api_table():
    """Code names an API (ApiKey.JOIN_GROUP); its number is written once, in groupd/protocol/api_table.py."""
    files = product_files() + sorted((ROOT / "bench").rglob("*.py"))
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in files
        if path.relative_to(ROOT).as_posix() != "groupd/protocol/api_table.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if BARE_API_NUMBER.search(line)
    ]
    assert not found, found


def test_the_bare_number_check_sees_one():
    assert BARE_API_NUMBER.search("    resp = await conn.call(11, 5, body)")
    assert BARE_API_NUMBER.search("API_VERSIONS = 18")
    assert not BARE_API_NUMBER.search("    resp = await conn.call(ApiKey.JOIN_GROUP, 5, body)")


# the coordinator's shell: the modules that put the rules and the runtime on the event loop and the disk
COORDINATOR_SHELL = {
    "groupd.coordinator.service",
    "groupd.coordinator.observe",
    "groupd.coordinator.tasks",
    "groupd.coordinator.runtime.loop",
    "groupd.coordinator.runtime.loader",
    "groupd.coordinator.transactions.service",
    "groupd.coordinator.share_state.service",
    "groupd.coordinator.internal_logs",
}


def test_the_core_and_the_runtime_import_no_asyncio_socket_or_clock():
    """The rules and the runtime take ``now`` as an argument and never await: a manual clock drives them."""
    banned = {"asyncio", "socket", "selectors", "time", "clock", "uvloop"}
    wrong = []
    for path in product_files():
        name = module_name(path)
        if room(name) != "coordinator" or name in COORDINATOR_SHELL:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                wrong += [f"{name} imports {a.name}" for a in node.names if a.name.split(".")[0] in banned]
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in banned:
                wrong.append(f"{name} imports from {node.module}")
    assert not wrong, wrong
