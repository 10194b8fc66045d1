"""Kafka's ``sasl.jaas.config`` value: ``<LoginModule> <flag> key="value" ... ;``.

Kafka reads it with a Java StreamTokenizer: words, double-quoted strings, ``//`` and ``/* */``
comments, ``=`` and ``;`` as single characters. groupd needs the module name and its options
(PlainLoginModule's ``user_<name>="<password>"`` ones).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
FLAGS = ("required", "requisite", "sufficient", "optional")
USER_PREFIX = "user_"

_TOKEN = re.compile(
    r"""\s+|//[^\n]*|/\*.*?\*/|"(?P<quoted>(?:[^"\\]|\\.)*)"|'(?P<single>(?:[^'\\]|\\.)*)'|(?P<word>[^\s=;"']+)|(?P<char>[=;])""",
    re.S,
)


class JaasError(ValueError):
    """A ``sasl.jaas.config`` that Kafka would refuse too."""


@dataclass(frozen=True, slots=True)
class LoginModule:
    name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    def users(self) -> dict[str, str]:
        """PlainLoginModule's ``user_<name>="<password>"`` options as {name: password}."""
        return {k[len(USER_PREFIX):]: v for k, v in self.options.items() if k.startswith(USER_PREFIX)}


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise JaasError(f"cannot read JAAS config at {text[pos:pos + 20]!r}")
        pos = m.end()
        if m.group("quoted") is not None:
            out.append(("str", re.sub(r"\\(.)", r"\1", m.group("quoted"))))
        elif m.group("single") is not None:
            out.append(("str", re.sub(r"\\(.)", r"\1", m.group("single"))))
        elif m.group("word") is not None:
            out.append(("str", m.group("word")))
        elif m.group("char") is not None:
            out.append(("char", m.group("char")))
    return out


def parse_jaas(text: str) -> LoginModule:
    """The one login module of a ``sasl.jaas.config`` (Kafka refuses none or several)."""
    tokens = _tokens(text)
    modules: list[LoginModule] = []
    i = 0
    while i < len(tokens):
        kind, name = tokens[i]
        if kind != "str":
            raise JaasError(f"expected a login module name, got {name!r}")
        if i + 1 >= len(tokens) or tokens[i + 1][0] != "str":
            raise JaasError("Login module control flag not specified in JAAS config")
        flag = tokens[i + 1][1].lower()
        if flag not in FLAGS:
            raise JaasError(f"Invalid login module control flag '{tokens[i + 1][1]}' in JAAS config")
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != ("char", ";"):
            key = tokens[i][1]
            if i + 2 >= len(tokens) or tokens[i + 1] != ("char", "=") or tokens[i + 2][0] != "str":
                raise JaasError(f"Value not specified for key '{key}' in JAAS config")
            options[key] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise JaasError("JAAS config entry not terminated by semi-colon")
        i += 1
        modules.append(LoginModule(name, flag, options))
    if not modules:
        raise JaasError("JAAS config property does not contain any login modules")
    if len(modules) != 1:
        raise JaasError(f"JAAS config property contains {len(modules)} login modules, should be 1 module")
    return modules[0]
