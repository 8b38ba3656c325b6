"""``ssl.principal.mapping.rules``: Kafka's documented examples and edge cases (the expected
names are those Kafka's ``SslPrincipalMapper`` gives), and hypothesis properties against a
model: rules rendered from a structure parse back to that structure, and mapping agrees with a
direct evaluation (first whole match, Python's own substitution, case)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.tls.principal import MappingRuleError, NoMatchingRule, Rule, parse_rules

KAFKA_RULES = ", ".join([
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
    "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
    "DEFAULT",
])


@pytest.mark.parametrize(("dn", "name"), [
    ("CN=Duke,OU=ServiceUsers,O=Org,C=US", "duke"),
    ("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US", "duke@sme"),
    ("cn=duke,ou=sme,dc=mycp,dc=com", "DUKE@SME"),
    ("cN=duke,OU=JavaSoft,O=Sun Microsystems", "DUKE"),
    ("OU=JavaSoft,O=Sun Microsystems,C=US", "OU=JavaSoft,O=Sun Microsystems,C=US"),
])
def test_kafka_documented_rules(dn: str, name: str) -> None:
    assert parse_rules(KAFKA_RULES).name(dn) == name


def test_default_and_unset_keep_the_distinguished_name() -> None:
    for text in ("DEFAULT", None):
        assert parse_rules(text).name("CN=a,O=b") == "CN=a,O=b"
    assert parse_rules("").rules == ()  # empty: no rule at all, so nothing maps
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=a"):
        parse_rules("").name("CN=a")


def test_escaped_comma_in_a_common_name() -> None:
    mapper = parse_rules("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


@pytest.mark.parametrize("text", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1", "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U", "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U", "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    "RULE:^CN=(/$1/",  # not a regular expression
])
def test_invalid_rules(text: str) -> None:
    with pytest.raises(MappingRuleError):
        parse_rules(text)


@pytest.mark.parametrize(("text", "rules"), [
    ("", []),
    ("DEFAULT", ["DEFAULT"]),
    ("RULE://", ["RULE:/"]),
    ("RULE:/.*/L", ["RULE:/.*/L"]),
    ("  RULE:// ,  DEFAULT  ", ["RULE:/", "DEFAULT"]),
    ("  RULE:   /     / ,  DEFAULT  ", ["RULE:   /     ", "DEFAULT"]),
    ("  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ",
     ["RULE:([A-Z]*)/$1/U", "RULE:([a-z]+)/$1", "DEFAULT"]),
    (",   , , ,      , , ,   ", []),
    (",,RULE://,,,DEFAULT,,", ["RULE:/", "DEFAULT"]),
    ("RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//", ["RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/"]),
    ("RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT",
     ["RULE:,RULE:,/,RULE:,\\//U", "RULE:,/RULE:,", "RULE:,RULE:,/L,RULE:,/L",
      "RULE:, DEFAULT, /DEFAULT", "DEFAULT"]),
])
def test_splitting(text: str, rules: list[str]) -> None:
    assert [str(rule) for rule in parse_rules(text).rules] == rules


@pytest.mark.parametrize(("rule", "dn", "name"), [
    ("RULE:^CN=(.*)$/$2-$1/", "CN=x", "$2-x"),  # a group the pattern lacks is literal
    ("RULE:^CN=(.*)$/$12/", "CN=x", "x2"),  # Java reads $12 as $1 then 2
    ("RULE:^CN=(.*)$/$0!/", "CN=x", "CN=x!"),  # $0: the whole match
    ("RULE:^CN=(.*)$/\\$1/", "CN=x", "$1"),  # \$ is a literal dollar
    ("RULE:^CN=(?P<who>.*)$/${who}/", "CN=x", "x"),
])
def test_java_replacement_syntax(rule: str, dn: str, name: str) -> None:
    assert parse_rules(rule).name(dn) == name


def test_a_reference_without_groups_fails_the_mapping() -> None:
    with pytest.raises(MappingRuleError, match="No group 1"):
        parse_rules("RULE:^CN=.*$/$1/").name("CN=x")


# -- properties against a model ---------------------------------------------------------------

PATTERNS = ["^CN=([a-z]+),OU=(.*)$", "^CN=(.*?),.*$", ".*", "^O=([A-Z]*)$", "^CN=[a-z]+$",
            "^(.*),O=(x|y)$", "CN=(..)(.*)"]
TEMPLATE_PARTS = ["$1", "$2", "@", "-", "x", "\\$", "\\\\", "\\/"]


@st.composite
def rule_structures(draw: st.DrawFn) -> tuple[str, str, str] | None:
    """None for DEFAULT, else (pattern, replacement, case)."""
    if draw(st.booleans()):
        return None
    pattern = draw(st.sampled_from(PATTERNS))
    groups = re.compile(pattern).groups
    parts = [p for p in TEMPLATE_PARTS if not p.startswith("$") or int(p[1]) <= groups]
    replacement = "".join(draw(st.lists(st.sampled_from(parts), max_size=4)))
    return pattern, replacement, draw(st.sampled_from(["", "L", "U"]))


def render(structure: tuple[str, str, str] | None) -> str:
    if structure is None:
        return "DEFAULT"
    pattern, replacement, case = structure
    return f"RULE:{pattern.replace('/', chr(92) + '/')}/{replacement}/{case}"


def model_name(structures: list[tuple[str, str, str] | None], dn: str) -> str | None:
    for structure in structures:
        if structure is None:
            return dn
        pattern, replacement, case = structure
        if re.fullmatch(pattern, dn) is None:
            continue
        python_template = (replacement.replace("\\\\", "\0").replace("\\$", "\1")
                           .replace("\\/", "/").replace("$1", "\\g<1>").replace("$2", "\\g<2>")
                           .replace("\0", "\\\\").replace("\1", "$"))
        name = re.sub(pattern, python_template, dn)
        return name.lower() if case == "L" else name.upper() if case == "U" else name
    return None


DNS = st.sampled_from(["CN=alice,OU=eng", "CN=bob,OU=ops,O=x", "O=ACME", "CN=Zed,O=y", "CN=ab",
                       "CN=carol", "OU=eng,O=x"])
SEPARATORS = st.sampled_from([",", ", ", " , ", ",,", " ,  , "])


@settings(max_examples=150, deadline=None)
@given(st.lists(rule_structures(), max_size=4), st.lists(SEPARATORS, min_size=4, max_size=4),
       DNS)
def test_rules_round_trip_and_map_as_the_model(
    structures: list[tuple[str, str, str] | None], separators: list[str], dn: str
) -> None:
    text = "".join(render(s) + sep for s, sep in zip(structures, separators, strict=False))
    mapper = parse_rules(text)
    assert [r.pattern.pattern if r.pattern else None for r in mapper.rules] == [
        s[0] if s else None for s in structures]
    assert [r.replacement for r in mapper.rules if r.pattern] == [s[1] for s in structures if s]
    expected = model_name(structures, dn)
    if expected is None:
        with pytest.raises(NoMatchingRule):
            mapper.name(dn)
    else:
        assert mapper.name(dn) == expected


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="RULE:DEFAULT/\\,LU .*$1", max_size=30))
def test_any_text_parses_or_raises_mapping_rule_error(text: str) -> None:
    try:
        mapper = parse_rules(text)
    except MappingRuleError:
        return
    assert all(isinstance(rule, Rule) for rule in mapper.rules)
