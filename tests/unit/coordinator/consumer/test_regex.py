"""Subscription regexes: RE2/J syntax (what Kafka compiles with com.google.re2j), whole-name matching."""

import pytest

from groupd.coordinator.consumer.regex import InvalidRegex, compile_regex, matching_topics


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


def test_matching_is_linear_in_the_topic_name():
    """Kafka matches with RE2/J, which never backtracks. Python's re takes ~2^n steps for ``(a+)+b``
    against n a's: one heartbeat with that regex and a topic of 40 a's (any client can create one)
    would hold the event loop for hours. Matched with RE2, the longest legal topic name is nothing."""
    import re2

    assert matching_topics("(a+)+b", ["a" * 249, "a" * 40 + "b"]) == {"a" * 40 + "b"}
    assert isinstance(compile_regex("(x+x+)+y"), re2._Regexp)
