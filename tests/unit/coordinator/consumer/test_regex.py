"""Subscription regexes: RE2/J syntax (what Kafka compiles with com.google.re2j), whole-name matching."""

import pytest

from coordinator.consumer.regex import InvalidRegex, compile_regex, matching_topics


@pytest.mark.parametrize(
    "pattern",
    ["foo.*", "^orders-[0-9]+$", "a|b", "(?i)Foo", "[(?=]x", r"\(?=", "(?P<n>ab)c", r"x\d{2,3}", "[]a]"],
)
def test_re2_patterns_compile(pattern):
    compile_regex(pattern)


@pytest.mark.parametrize(
    "pattern",
    [
        "(",  # unbalanced
        "*a",  # nothing to repeat
        r"(a)\1",  # backreference
        "(?P<n>a)(?P=n)",  # named backreference
        "a(?=b)",  # lookahead
        "a(?!b)",
        "(?<=a)b",  # lookbehind
        "(?<!a)b",
        "(?>a)",  # atomic group
        "(a)?(?(1)b|c)",  # conditional
        "a*+",  # possessive
        "a++",
        r"a\Z",
    ],
)
def test_what_re2_refuses_is_invalid(pattern):
    with pytest.raises(InvalidRegex):
        compile_regex(pattern)


def test_a_regex_matches_whole_topic_names():
    topics = ["foo", "foo1", "xfoo1", "foo-bar", "bar"]
    assert matching_topics("foo.*", topics) == {"foo", "foo1", "foo-bar"}
    assert matching_topics("foo", topics) == {"foo"}  # not a prefix or substring match
    assert matching_topics(".*bar", topics) == {"foo-bar", "bar"}
