"""docs/testing-your-app.md's recipes are tests: every ```python block after a ``<!-- recipe -->`` line is
a whole test module, run here as a user runs it (a pytest of its own with groupd's plugin), all in one
run; each must pass."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.testing.test_plugin import run

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing-your-app.md"
RECIPE = re.compile(r"<!-- recipe -->\n```python\n(.*?)```", re.S)


def recipes() -> list[str]:
    return RECIPE.findall(DOC.read_text())


def test_the_page_has_a_recipe_for_each_client_and_feature():
    text = "\n".join(recipes())
    for needed in (
        "KafkaConsumer",
        "AIOKafkaConsumer",
        '"group.protocol": protocol',
        "ShareConsumer",
        "commit_transaction",
        "groupd_fresh_broker",
        "with Broker(",
    ):
        assert needed in text, needed


def test_every_recipe_passes(pytester: pytest.Pytester):
    modules = recipes()
    for n, source in enumerate(modules):
        pytester.makepyfile(**{f"test_recipe_{n}": source})
    result = run(pytester, "-q")
    counts = result.parseoutcomes()
    assert counts.get("failed", 0) == counts.get("errors", 0) == 0, result.stdout.str()[-3000:]
    assert counts.get("passed", 0) >= len(modules)  # parametrized recipes count more than once
