"""Generate groupd/protocol/old_schemas/: kio-shaped entity classes for the request versions Kafka 3.9 accepted
and Kafka 4 (KIP-896) removed, so that kio 0.6.5 (generated from Kafka 4.x, without them) is not
replaced and no other kio release has to live beside it.

Input: Kafka 3.9's message JSON read straight from a git checkout of apache/kafka (never copied into
this project). Output: one module per (API, version, request|response) with frozen dataclasses carrying
the same field metadata kio's generated classes carry (``kafka_type``, optionality by annotation,
nested entities by annotation), so kio's own ``entity_reader`` and this project's compiled writers
encode them. Field naming follows kio's (snake case, ``...Ms`` int32 durations as ``timedelta_i32``
without the suffix, ``ErrorCode`` as ``error_code``, ``entityType`` aliases); ``--check`` proves the
rules by generating the lowest version kio does carry for each API and comparing it with kio's class.

    python scripts/gen_old_schemas.py --kafka-git /path/to/kafka/.git --ref 3.9 [--check]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

MESSAGE_DIR = "clients/src/main/resources/common/message"
OUT_DIR = Path(__file__).resolve().parent.parent / "protocol" / "old_schemas"

# API key -> the versions to generate: those Kafka 3.9 accepts below kio 0.6.5's lowest (see
# tests/unit/test_old_versions_table.py for the 3.9 ranges themselves).
KIO_LOWEST = {0: 3, 1: 4, 2: 1, 8: 2, 9: 1, 19: 2, 20: 1, 23: 2, 29: 1, 30: 1, 31: 1, 32: 1, 34: 1, 35: 1}

_ENTITY_ALIASES = {  # JSON entityType (and base type) -> kio.schema.types alias
    ("topicName", "string"): "TopicName",
    ("groupId", "string"): "GroupId",
    ("transactionalId", "string"): "TransactionalId",
    ("brokerId", "int32"): "BrokerId",
    ("producerId", "int64"): "ProducerId",
}
_PRIMITIVES = {  # JSON type -> (annotation, kafka_type)
    "int8": ("i8", "int8"),
    "int16": ("i16", "int16"),
    "int32": ("i32", "int32"),
    "int64": ("i64", "int64"),
    "uint16": ("u16", "uint16"),
    "float64": ("f64", "float64"),
    "bool": ("bool", "bool"),
    "string": ("str", "string"),
    "bytes": ("bytes", "bytes"),
    "records": ("Records", "records"),
    "uuid": ("uuid.UUID", "uuid"),
}
_PRIMITIVE_IMPORTS = {
    "i8": "from kio.static.primitive import i8",
    "i16": "from kio.static.primitive import i16",
    "i32": "from kio.static.primitive import i32",
    "i64": "from kio.static.primitive import i64",
    "u16": "from kio.static.primitive import u16",
    "f64": "from kio.static.primitive import f64",
    "Records": "from kio.static.primitive import Records",
    "i32Timedelta": "from kio.static.primitive import i32Timedelta",
    "i64Timedelta": "from kio.static.primitive import i64Timedelta",
    "TZAware": "from kio.static.primitive import TZAware",
    "ErrorCode": "from kio.schema.errors import ErrorCode",
    "uuid.UUID": "import uuid",
    "datetime": "import datetime",
}


def strip_comments(text: str) -> str:
    """Kafka's message files are JSON with // line comments (outside strings)."""
    out, in_string, i = [], False, 0
    while i < len(text):
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            while i < len(text) and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def in_versions(spec: str | None, version: int) -> bool:
    if not spec or spec == "none":
        return False
    if spec.endswith("+"):
        return version >= int(spec[:-1])
    lo, _, hi = spec.partition("-")
    return int(lo) <= version <= int(hi or lo)


def version_range(spec: str) -> tuple[int, int]:
    lo, _, hi = spec.partition("-")
    return int(lo), int(hi or lo)


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


@dataclasses.dataclass
class Field:
    name: str
    annotation: str
    kafka_type: str | None  # None: an entity or entity array (kio reads these by annotation)
    default: str | None


@dataclasses.dataclass
class Entity:
    class_name: str
    kind: str  # "request" | "response" | "nested"
    fields: list[Field]


class Generator:
    def __init__(self, schema: dict, version: int) -> None:
        self.schema = schema
        self.version = version
        self.entities: list[Entity] = []
        self.names: set[str] = set()
        self.common = {s["name"]: s for s in schema.get("commonStructs", [])}
        if in_versions(schema.get("flexibleVersions"), version):
            raise SystemExit(f"{schema['name']} v{version} is flexible: not a removed old version")

    def run(self) -> list[Entity]:
        self.entity(self.schema["name"], self.schema["type"], self.schema["fields"])
        return self.entities

    def entity(self, class_name: str, kind: str, json_fields: list[dict]) -> None:
        out = [f for f in (self.field(j) for j in json_fields if in_versions(j["versions"], self.version)) if f]
        if class_name not in self.names:
            self.names.add(class_name)
            self.entities.append(Entity(class_name, kind, out))

    def field(self, j: dict) -> Field | None:
        if j.get("taggedVersions"):
            return None  # tagged fields exist only in flexible versions
        name, jtype = j["name"], j["type"]
        nullable = in_versions(j.get("nullableVersions"), self.version)
        is_array = jtype.startswith("[]")
        base = jtype[2:] if is_array else jtype
        if base not in _PRIMITIVES:  # a struct: nested fields, or a common struct by name
            sub = j.get("fields") or self.common[base]["fields"]
            self.entity(base, "nested", sub)
            ann = f"tuple[{base}, ...]" if is_array else base
            return Field(snake(name), ann + (" | None" if nullable else ""), None, None)
        ann, kafka_type = _PRIMITIVES[base]
        fname = snake(name)
        alias = _ENTITY_ALIASES.get((j.get("entityType", ""), base))
        if alias:
            ann = alias
        if name == "ErrorCode" and base == "int16":
            ann, kafka_type = "ErrorCode", "error_code"
        elif base in ("int32", "int64") and name.endswith("Ms") and not is_array and _is_duration(name):
            ann, kafka_type = (
                ("i32Timedelta", "timedelta_i32") if base == "int32" else ("i64Timedelta", "timedelta_i64")
            )
            fname = fname.removesuffix("_ms")
        elif base == "int64" and name.endswith("Ms") and not is_array:  # a point in time, -1 for none
            ann, kafka_type, fname = "TZAware", "datetime_i64", fname.removesuffix("_ms")
            if str(j.get("default")) == "-1":
                return Field(fname, "TZAware | None", kafka_type, "None")
        if is_array:
            ann = f"tuple[{ann}, ...]"
        if nullable:
            ann += " | None"
        return Field(fname, ann, kafka_type, self.default(j, ann, kafka_type, nullable, is_array))

    @staticmethod
    def default(j: dict, ann: str, kafka_type: str | None, nullable: bool, is_array: bool) -> str | None:
        if is_array:
            return "()"  # kio's primitive arrays default to empty
        if "default" not in j:
            return None
        value = str(j["default"])
        if value == "null":
            return "None" if nullable else None
        if kafka_type == "bool":
            return "True" if value == "true" else "False"
        if kafka_type == "string":
            return json.dumps(value)
        if kafka_type == "error_code":
            return f"ErrorCode({int(value, 0)})"
        if kafka_type in ("timedelta_i32", "timedelta_i64"):
            cls = ann.split(" ")[0]
            return f"{cls}.parse(datetime.timedelta(milliseconds={int(value, 0)}))"
        if kafka_type in ("int8", "int16", "int32", "int64", "uint16"):
            return f"{ann.split(' ')[0]}({int(value, 0)})"
        return None


def _is_duration(name: str) -> bool:
    return not any(word in name for word in ("Timestamp", "AppendTime", "StartTime"))


def render(api_key: int, version: int, kind: str, entities: list[Entity], source: str, ref: str) -> str:
    header_mod = (
        "request_header.v1.header import RequestHeader"
        if kind == "request"
        else "response_header.v0.header import ResponseHeader"
    )
    header_cls = "RequestHeader" if kind == "request" else "ResponseHeader"
    used: set[str] = set()
    body: list[str] = []
    for ent in entities:  # nested classes come first (Generator.entity appends children before parents)
        entity_type = "request" if ent.kind == "request" else "response" if ent.kind == "response" else "nested"
        body += [
            "",
            "",
            "@dataclass(frozen=True, slots=True, kw_only=True)",
            f"class {ent.class_name}:",
            f"    __type__: ClassVar = EntityType.{entity_type}",
            f"    __version__: ClassVar[i16] = i16({version})",
            "    __flexible__: ClassVar[bool] = False",
            f"    __api_key__: ClassVar[i16] = i16({api_key})",
            f"    __header_schema__: ClassVar[type[{header_cls}]] = {header_cls}",
        ]
        used.add("i16")
        for f in ent.fields:
            for token in re.findall(r"[A-Za-z_][A-Za-z_0-9.]*", f.annotation + " " + (f.default or "")):
                used.update((token, token.split(".")[0]))
            if f.kafka_type is None:
                body.append(f"    {f.name}: {f.annotation}")
                continue
            extra = f", default={f.default}" if f.default is not None else ""
            body.append(f'    {f.name}: {f.annotation} = field(metadata={{"kafka_type": "{f.kafka_type}"}}{extra})')
    imports = ["from dataclasses import dataclass", "from dataclasses import field", "from typing import ClassVar", ""]
    imports.append(f"from kio.schema.{header_mod}")
    for alias in sorted({a for a in _ENTITY_ALIASES.values() if a in used}):
        imports.append(f"from kio.schema.types import {alias}")
    imports.append("from kio.static.constants import EntityType")
    extra_imports = sorted(
        {line for token, line in _PRIMITIVE_IMPORTS.items() if token in used or token.split(".")[0] in used}
    )
    std = [i for i in extra_imports if i.startswith("import ")]
    kio_lines = [i for i in extra_imports if not i.startswith("import ")]
    doc = (
        f'"""{source} at Kafka {ref}, version {version} (generated by scripts/gen_old_schemas.py; do not edit)."""\n\n'
    )
    std_block = ("\n".join(std) + "\n") if std else ""
    return doc + std_block + "\n".join(imports + kio_lines) + "\n" + "\n".join(body) + "\n"


def load_json(kafka_git: str, ref: str, name: str) -> dict:
    text = subprocess.run(
        ["git", f"--git-dir={kafka_git}", "show", f"{ref}:{MESSAGE_DIR}/{name}.json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(strip_comments(text))


def schema_names(kafka_git: str, ref: str) -> dict[int, str]:
    """API key -> the base name of its message files (``Produce`` for ProduceRequest.json)."""
    listing = subprocess.run(
        ["git", f"--git-dir={kafka_git}", "ls-tree", "--name-only", f"{ref}:{MESSAGE_DIR}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    out = {}
    for file in listing:
        if file.endswith("Request.json"):
            schema = load_json(kafka_git, ref, file[: -len(".json")])
            out[schema["apiKey"]] = file[: -len("Request.json")]
    return out


def module_name(base: str, version: int, kind: str) -> str:
    return f"{snake(base)}_v{version}_{kind}"


def generate(kafka_git: str, ref: str) -> None:
    names = schema_names(kafka_git, ref)
    OUT_DIR.mkdir(exist_ok=True)
    for old in OUT_DIR.glob("*_v*_*.py"):
        old.unlink()
    index = []
    for api_key, kio_lowest in sorted(KIO_LOWEST.items()):
        base = names[api_key]
        for kind in ("request", "response"):
            schema = load_json(kafka_git, ref, f"{base}{kind.capitalize()}")
            lo, _ = version_range(schema["validVersions"])
            for version in range(lo, kio_lowest):
                entities = Generator(schema, version).run()
                mod = module_name(base, version, kind)
                (OUT_DIR / f"{mod}.py").write_text(
                    render(api_key, version, kind, entities, f"{base}{kind.capitalize()}.json", ref)
                )
                if kind == "request":
                    index.append(
                        (
                            api_key,
                            version,
                            module_name(base, version, "request"),
                            module_name(base, version, "response"),
                            schema["name"],
                            names[api_key],
                        )
                    )
    lines = [
        '"""Entity classes for the versions Kafka 3.9 accepted below kio 0.6.5\'s lowest, generated from',
        "Kafka's message JSON by scripts/gen_old_schemas.py (the JSON itself is not kept here).",
        "",
        "SCHEMAS maps (api key, version) to the request and response classes; groupd/protocol/codec.py looks here",
        'when kio has no class for a pair."""',
        "",
        "from __future__ import annotations",
        "",
        "import importlib",
        "",
        "MODULES: dict[tuple[int, int], tuple[str, str]] = {",
    ]
    for api_key, version, req, resp, _req_cls, _base in index:
        lines.append(f'    ({api_key}, {version}): ("{req}", "{resp}"),')
    lines += [
        "}",
        "",
        "",
        "def _entity_class(module: str) -> type:",
        '    mod = importlib.import_module(f"groupd.protocol.old_schemas.{module}")',
        '    return next(v for v in vars(mod).values() if isinstance(v, type) '
        'and getattr(v, "__type__", None) is not None',
        '                and v.__type__.name in ("request", "response"))',
        "",
        "",
        "def request_class(api_key: int, version: int) -> type | None:",
        "    pair = MODULES.get((api_key, version))",
        "    return None if pair is None else _entity_class(pair[0])",
        "",
        "",
        "def response_class(api_key: int, version: int) -> type | None:",
        "    pair = MODULES.get((api_key, version))",
        "    return None if pair is None else _entity_class(pair[1])",
        "",
    ]
    (OUT_DIR / "__init__.py").write_text("\n".join(lines))
    ruff = Path(sys.executable).parent / "ruff"  # import order as the project's lint wants it
    subprocess.run([str(ruff), "check", "--fix", "--quiet", "--select", "I", str(OUT_DIR)], check=False)
    print(f"wrote {len(index) * 2} modules to {OUT_DIR}")


def check(kafka_git: str, ref: str) -> int:
    """Generate each API's lowest kio version with these rules and compare it with kio's own class."""
    from kio.index import load_request_schema, load_response_schema

    names = schema_names(kafka_git, ref)
    problems = 0
    for api_key, kio_lowest in sorted(KIO_LOWEST.items()):
        base = names[api_key]
        for kind, load in (("request", load_request_schema), ("response", load_response_schema)):
            schema = load_json(kafka_git, ref, f"{base}{kind.capitalize()}")
            ours = {e.class_name: e for e in Generator(schema, kio_lowest).run()}
            top = load(api_key, kio_lowest)
            module = sys.modules[top.__module__]
            for cname, ent in ours.items():
                theirs = getattr(module, cname, None)
                if theirs is None:
                    print(f"{base}{kind} v{kio_lowest}: kio has no class {cname}")
                    problems += 1
                    continue
                kf = {f.name: f for f in dataclasses.fields(theirs)}
                mine = [f.name for f in ent.fields]
                if mine != list(kf):
                    print(f"{base}{kind} v{kio_lowest} {cname}: fields {mine} != kio {list(kf)}")
                    problems += 1
                    continue
                for f in ent.fields:
                    k = kf[f.name]
                    if f.kafka_type != k.metadata.get("kafka_type"):
                        print(
                            f"{base}{kind} v{kio_lowest} {cname}.{f.name}: {f.kafka_type} != "
                            f"{k.metadata.get('kafka_type')}"
                        )
                        problems += 1
                    theirs_default = None if k.default is dataclasses.MISSING else repr(k.default)
                    ours_default = None if f.default is None else repr(eval(f.default, _default_env()))  # noqa: S307 - our own generated text
                    if theirs_default != ours_default:
                        print(
                            f"{base}{kind} v{kio_lowest} {cname}.{f.name}: default {ours_default} vs kio "
                            f"{theirs_default}"
                        )
                        problems += 1
                    k_text = type_text(k.type)
                    if k_text != f.annotation:
                        print(f"{base}{kind} v{kio_lowest} {cname}.{f.name}: {f.annotation} vs kio {k_text}")
                        problems += 1
    print(f"{problems} difference(s)")
    return 1 if problems else 0


def _default_env() -> dict:
    import datetime

    from kio.schema import types as kio_types
    from kio.schema.errors import ErrorCode
    from kio.static import primitive

    return {**vars(primitive), **vars(kio_types), "ErrorCode": ErrorCode, "datetime": datetime}


def type_text(t: object) -> str:
    """An annotation as the generated source spells it (for --check)."""
    import types
    import typing

    if isinstance(t, types.UnionType):
        return " | ".join(type_text(a) for a in typing.get_args(t))
    if typing.get_origin(t) is tuple:
        return f"tuple[{type_text(typing.get_args(t)[0])}, ...]"
    if t is type(None):
        return "None"
    return "uuid.UUID" if getattr(t, "__module__", "") == "uuid" else t.__name__


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kafka-git", required=True, help="git dir of an apache/kafka clone")
    parser.add_argument("--ref", default="3.9")
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.check:
        return check(args.kafka_git, args.ref)
    generate(args.kafka_git, args.ref)
    return 0


if __name__ == "__main__":
    sys.exit(main())
