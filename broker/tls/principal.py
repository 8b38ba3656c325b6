"""``ssl.principal.mapping.rules``: a client certificate's distinguished name -> the principal's
name, with the semantics of Kafka's ``SslPrincipalMapper`` (our own code, same rules).

Syntax: a comma-separated list of ``DEFAULT`` and ``RULE:<pattern>/<replacement>/[L|U]``
entries (``\\`` escapes a ``/`` or ``\\`` inside a pattern or replacement; an empty entry is
ignored; anything else fails with "Invalid rule"). The first rule whose pattern matches the
*whole* distinguished name gives the name: every match of the pattern in the name is replaced by
the replacement (Java's ``String.replaceAll``: ``$n`` is a group, ``\\x`` a literal ``x``; a
``$n`` naming a group the pattern does not have is taken literally, as Kafka escapes it), then
lower-cased (``/L``) or upper-cased (``/U``). ``DEFAULT`` gives the distinguished name
unchanged. No rule matching is an error (``NoMatchingRule``): Kafka fails that client's
authentication.

Patterns are Python ``re`` patterns; for what mapping rules use (groups, classes, ``.*``,
anchors, lazy quantifiers) Java's and Python's syntax agree.

Immutable values, pure functions; ``parse_rules`` runs once at start-up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "DEFAULT_RULES",
    "MappingRuleError",
    "NoMatchingRule",
    "PrincipalMapper",
    "Rule",
    "parse_rules",
]

DEFAULT_RULES = "DEFAULT"
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class MappingRuleError(ValueError):
    """``ssl.principal.mapping.rules`` cannot be parsed, or a replacement cannot be applied."""


class NoMatchingRule(MappingRuleError):
    """No rule applies to a distinguished name."""


@dataclass(frozen=True, slots=True)
class Rule:
    """``DEFAULT`` (``pattern`` None) or ``RULE:pattern/replacement/[L|U]``."""

    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    to_lower_case: bool = False
    to_upper_case: bool = False

    def apply(self, distinguished_name: str) -> str | None:
        """The mapped name, or None when the pattern does not match the whole name."""
        if self.pattern is None:
            return distinguished_name
        if self.pattern.fullmatch(distinguished_name) is None:
            return None
        template = _escape_literal_back_references(self.replacement, self.pattern.groups)
        result = self.pattern.sub(lambda match: _expand(template, match), distinguished_name)
        if self.to_lower_case:
            return result.lower()
        return result.upper() if self.to_upper_case else result

    def __str__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        case = "/L" if self.to_lower_case else "/U" if self.to_upper_case else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{case}"


@dataclass(frozen=True, slots=True)
class PrincipalMapper:
    rules: tuple[Rule, ...]

    def name(self, distinguished_name: str) -> str:
        """The principal name for ``distinguished_name``; ``NoMatchingRule`` when none applies."""
        for rule in self.rules:
            name = rule.apply(distinguished_name)
            if name is not None:
                return name
        listed = ", ".join(map(str, self.rules))
        raise NoMatchingRule(f"No rules apply to {distinguished_name}, rules [{listed}]")


def parse_rules(text: str | None) -> PrincipalMapper:
    """Parse ``ssl.principal.mapping.rules``; ``MappingRuleError`` names the bad rule."""
    parsed = (_parse(rule) for rule in _split(DEFAULT_RULES if text is None else text))
    return PrincipalMapper(tuple(rule for rule in parsed if rule is not None))


def _split(text: str) -> list[str]:
    return [match.group(1) for match in _SPLITTER.finditer(text.strip())]


def _parse(text: str) -> Rule | None:
    match = _PARSER.match(text)
    assert match is not None  # the last alternative matches anything, even nothing
    if match.end() != len(text):
        raise MappingRuleError(f"Invalid rule: `{text}`, unmatched substring: "
                               f"`{text[match.end():]}`")
    if match.group(1) is not None:
        return Rule()
    if match.group(2) is None:
        return None  # an empty rule
    try:
        pattern = re.compile(match.group(2))
    except re.error as error:
        raise MappingRuleError(f"Invalid rule: `{text}`: bad pattern: {error}") from None
    return Rule(pattern, match.group(4), match.group(6) == "L", match.group(6) == "U")


def _escape_literal_back_references(template: str, groups: int) -> str:
    """Kafka's ``escapeLiteralBackReferences``: a ``$n`` naming no group (after dropping the
    digits that make it too big, as Java reads ``$12`` as ``$1`` then ``2``) gets a backslash.
    The positions come from the unescaped string, as in Kafka (its output for several such
    references included)."""
    if groups == 0:
        return template
    value = template
    for match in _BACK_REFERENCE.finditer(template):
        digits = match.group(1)
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            start = match.start(1)
            value = value[:start - 1] + "\\" + value[start - 1:]
    return value


def _expand(template: str, match: re.Match[str]) -> str:
    """Java's ``Matcher.appendReplacement`` expansion of ``template`` for ``match``."""
    out: list[str] = []
    cursor, groups = 0, match.re.groups
    while cursor < len(template):
        char = template[cursor]
        if char == "\\":
            if cursor + 1 >= len(template):
                raise MappingRuleError("character to be escaped is missing")
            out.append(template[cursor + 1])
            cursor += 2
        elif char == "$":
            cursor, text = _group_reference(template, cursor + 1, match, groups)
            out.append(text)
        else:
            out.append(char)
            cursor += 1
    return "".join(out)


def _group_reference(template: str, cursor: int, match: re.Match[str], groups: int
                     ) -> tuple[int, str]:
    if cursor >= len(template):
        raise MappingRuleError("Illegal group reference: group index is missing")
    if template[cursor] == "{":
        end = template.find("}", cursor)
        name = template[cursor + 1:end] if end > 0 else ""
        if end < 0 or name not in match.re.groupindex:
            raise MappingRuleError(f"No group with name {{{name}}}")
        return end + 1, match.group(name) or ""
    if not template[cursor].isdigit() or not template[cursor].isascii():
        raise MappingRuleError("Illegal group reference")
    number, cursor = int(template[cursor]), cursor + 1
    while cursor < len(template) and template[cursor].isascii() and template[cursor].isdigit():
        candidate = number * 10 + int(template[cursor])
        if candidate > groups:
            break
        number, cursor = candidate, cursor + 1
    if number > groups:
        raise MappingRuleError(f"No group {number}")
    return cursor, match.group(number) or ""
