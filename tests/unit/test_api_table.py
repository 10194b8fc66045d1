import re
from pathlib import Path

from kio.schema.index import api_key_map, schema_name_map

from groupd.broker.routes import HANDLERS, ROUTES
from groupd.protocol import old_schemas
from groupd.protocol.api_table import API_BY_NAME, API_TABLE, ApiKey, support_table_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_every_api_has_a_handler_and_schemas():
    for key, spec in API_TABLE.items():
        assert key in HANDLERS, f"{spec.name} is advertised but has no handler"
        versions = schema_name_map[api_key_map[key]]
        for v in range(spec.min_version, spec.max_version + 1):
            assert v in versions or (key, v) in old_schemas.MODULES, f"no schema for {spec.name} v{v}"


def test_no_handler_outside_the_table():
    assert set(HANDLERS) <= set(API_TABLE)


def test_routes_name_every_api_of_the_table_and_nothing_else():
    """One table routes requests: by API name, exactly the APIs that ApiVersions advertises."""
    assert set(ROUTES) == set(API_BY_NAME)
    assert {API_BY_NAME[name].key: fn for name, fn in ROUTES.items()} == HANDLERS


def test_api_key_names_follow_the_table():
    """ApiKey.JOIN_GROUP is JoinGroup's key: the enum and the table cannot drift apart."""
    for spec in API_TABLE.values():
        member = ApiKey[re.sub(r"(?<!^)(?=[A-Z])", "_", spec.name).upper()]
        assert member == spec.key and type(spec.key) is int
    assert len(ApiKey) == len(API_TABLE)


def test_readme_table_is_generated_from_the_table():
    readme = (ROOT / "README.md").read_text()
    assert support_table_markdown() in readme, "README's API table is stale: python scripts/readme_tables.py"


def test_versions_are_sane():
    for spec in API_TABLE.values():
        assert 0 <= spec.min_version <= spec.max_version
        assert re.match(r"^[A-Z][A-Za-z]+$", spec.name)
