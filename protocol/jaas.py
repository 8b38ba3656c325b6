"""Kafka's ``sasl.jaas.config`` value: JAAS login module entries, parsed.

Shared by the broker (PLAIN users) and the client (``PlainLoginModule`` / ``ScramLoginModule``
``username`` and ``password``); a text format of Kafka's, pure like the rest of ``protocol``.

Grammar (Kafka's ``JaasConfig``, a ``StreamTokenizer`` over the value)::

    entry   = module-class flag *(option) ";"
    flag    = "required" / "requisite" / "sufficient" / "optional"
    option  = name "=" value          ; value: a "quoted string" or a bare word

A quoted string may hold any character but an unescaped ``"``; ``\\"`` and ``\\\\`` are
escapes. Bare words are letters, digits and ``._-$``. Anything else (a missing ``;``, a bad
flag, an option without ``=``, a stray token) raises ``JaasError`` with the reason and never
echoes option values, which hold passwords.

Pure functions; no state.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["FLAGS", "JaasError", "LoginModule", "parse_jaas_config"]

FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})

_TOKEN = re.compile(
    r'\s*(?:(?P<word>[A-Za-z0-9_.$\-]+)|"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<symbol>[=;]))',
    re.DOTALL,
)
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


class JaasError(ValueError):
    """A ``sasl.jaas.config`` value that is not a JAAS configuration."""


@dataclass(frozen=True, slots=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def parse_jaas_config(text: str) -> list[LoginModule]:
    """The login modules of ``text``, in order (at least one)."""
    tokens = _tokenize(text)
    modules: list[LoginModule] = []
    position = 0
    while position < len(tokens):
        module, position = _entry(tokens, position)
        modules.append(module)
    if not modules:
        raise JaasError("no login module is configured")
    return modules


_Token = tuple[str, str]  # (kind: "word" | "quoted" | "symbol", text)


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None:
            bad = text[position:].lstrip()[:1]
            raise JaasError(f"unexpected character {bad!r} at offset {position}")
        kind = match.lastgroup
        assert kind is not None
        value = match.group(kind)
        if kind == "quoted":
            value = _ESCAPE.sub(r"\1", value)
        tokens.append((kind, value))
        position = match.end()
    return tokens


def _entry(tokens: list[_Token], position: int) -> tuple[LoginModule, int]:
    kind, class_name = tokens[position]
    if kind != "word":
        raise JaasError("a login module class name is expected at the start of an entry")
    if position + 1 >= len(tokens) or tokens[position + 1][0] != "word":
        raise JaasError(f"login module {class_name}: a control flag is expected")
    flag = tokens[position + 1][1]
    if flag.lower() not in FLAGS:
        raise JaasError(f"login module {class_name}: invalid control flag {flag!r}")
    options: dict[str, str] = {}
    position += 2
    while True:
        if position >= len(tokens):
            raise JaasError(f"login module {class_name}: the entry does not end with ';'")
        kind, text = tokens[position]
        if kind == "symbol" and text == ";":
            return LoginModule(class_name, flag.lower(), options), position + 1
        if kind != "word":
            raise JaasError(f"login module {class_name}: an option name is expected")
        if position + 2 >= len(tokens) or tokens[position + 1] != ("symbol", "="):
            raise JaasError(f"login module {class_name}: option {text!r} has no '=' value")
        value_kind, value = tokens[position + 2]
        if value_kind == "symbol":
            raise JaasError(f"login module {class_name}: option {text!r} has no value")
        options[text] = value
        position += 3
