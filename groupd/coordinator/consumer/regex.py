"""Subscription regular expressions in Kafka's syntax (RE2/J), matched against whole topic names.

Kafka compiles ``SubscribedTopicRegex`` with Google's RE2/J and answers INVALID_REGULAR_EXPRESSION when it
does not compile; a topic is subscribed when the expression matches its whole name. Python's ``re`` is a
superset of RE2's syntax for what matters here, so a pattern is refused when it uses what RE2 has not
(backreferences, lookaround, atomic groups, conditionals, possessive quantifiers) or when ``re`` itself
refuses it; what is left compiles the same way in both.

Matching runs on RE2 itself (the google-re2 binding), as Kafka's does: RE2 never backtracks, so a client's
``(a+)+b`` costs time linear in the topic name, where Python's ``re`` would hold the event loop for hours.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import re2

# Constructs RE2 rejects but Python's re accepts (RE2 syntax: github.com/google/re2/wiki/Syntax,
# "NOT SUPPORTED" entries)
_UNSUPPORTED = re.compile(
    r"""
    \\[1-9]                 # backreference \1..\9
  | \\g<                    # \g<name> backreference
  | \(\?P=                  # (?P=name) backreference
  | \(\?[=!]                # lookahead
  | \(\?<[=!]               # lookbehind
  | \(\?>                   # atomic group
  | \(\?\(                  # conditional
  | (?<![\\])[*+?}]\+       # possessive quantifier
  | \\Z                     # Python's end anchor (RE2 has \z)
    """,
    re.VERBOSE,
)

_cache: dict[str, re2._Regexp] = {}
_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # RE2 would print the client's pattern to stderr, unescaped


class InvalidRegex(ValueError):
    """Kafka's InvalidRegularExpressionException (error 128)."""


def _strip_escapes(pattern: str) -> str:
    """The pattern with every escaped character and character class body blanked, so the scan below
    sees only operators (``\\(?=`` and ``[(?=]`` are literals, not lookaheads)."""
    out = []
    i = 0
    in_class = False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            # keep backreference-like escapes visible; blank every other escape
            out.append(pattern[i : i + 2] if (nxt.isdigit() and nxt != "0") or nxt in "gZ" else "__")
            i += 2
            continue
        if in_class:
            if c == "]":
                in_class = False
                out.append("]")
            else:
                out.append("_")
        elif c == "[":
            in_class = True
            out.append("[")
            if pattern[i + 1 : i + 2] == "]":  # a leading ] is a literal
                out.append("_")
                i += 1
        else:
            out.append(c)
        i += 1
    return "".join(out)


def compile_regex(pattern: str) -> re2._Regexp:
    cached = _cache.get(pattern)
    if cached is not None:
        return cached
    bare = _strip_escapes(pattern)
    found = _UNSUPPORTED.search(bare)
    if found:
        raise InvalidRegex(f"{pattern!r}: {found.group(0)!r} is not RE2 syntax")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise InvalidRegex(f"{pattern!r}: {exc}") from None
    try:
        compiled = re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        raise InvalidRegex(f"{pattern!r}: {exc}") from None
    if len(_cache) > 4096:
        _cache.clear()
    _cache[pattern] = compiled
    return compiled


def matching_topics(pattern: str, topics: Iterable[str]) -> frozenset[str]:
    compiled = compile_regex(pattern)
    return frozenset(t for t in topics if compiled.fullmatch(t))
