"""rules/schema.py: loading errors name the file, the rule id and the full key."""

import pytest

from rules.engine import RuleEngine, RuleError

GOOD_RULE = """
  - id: r1
    targets: [args]
    operator: {regex: "evil"}
    tags: [sqli]
"""


def write(tmp_path, rules: str, head: str = "name: t\nversion: '2'\n") -> str:
    path = tmp_path / "rules.yaml"
    path.write_text(head + "rules:\n" + rules.lstrip("\n"))
    return str(path)


def load_error(tmp_path, rules: str, head: str = "name: t\nversion: '2'\n") -> str:
    path = write(tmp_path, rules, head)
    with pytest.raises(RuleError) as err:
        RuleEngine.load(path)
    msg = str(err.value)
    assert msg.startswith(path + ":"), msg
    return msg


BAD = [
    ("- {id: a, targets: [args], operator: {regex: x}, colour: red}", "rule 'a': colour: unknown key"),
    ("- {id: a, targets: [args], operator: {regex: '(x'}}", "rule 'a': operator.regex: invalid pattern"),
    ("- {id: a, targets: [args], operator: {regex: '(a)\\1'}}", "rule 'a': operator.regex: invalid pattern"),
    ("- {id: a, targets: [args], operator: {regex: x}, tags: [sqli, evil]}", "rule 'a': tags[1]: unknown tag 'evil'"),
    ("- {id: a, targets: [client], operator: {ip: ['10.0.0.0/40']}}", "rule 'a': operator.ip[0]: invalid address or CIDR"),
    ("- {id: a, targets: [args, bodies], operator: {regex: x}}", "rule 'a': targets[1]: unknown target 'bodies'"),
    ("- {id: a, targets: [args], transforms: [rot13], operator: {regex: x}}", "rule 'a': transforms[0]: unknown transformation"),
    ("- {id: a, targets: [args], operator: {regex: x}, severity: huge}", "rule 'a': severity: must be one of"),
    ("- {id: a, targets: [args], operator: {regex: x}, label: deny}", "rule 'a': label: must be one of"),
    ("- {id: a, targets: [args], operator: {regex: x}, max_length: -1}", "rule 'a': max_length: must be an integer"),
    ("- {id: a, targets: [args], operator: {regex: x}, except: {names: [q]}}", "rule 'a': except: must be a list"),
    ("- {id: a, targets: [args], operator: {regex: x}, except: [{with_args: [q]}]}", "rule 'a': except[0].names: required"),
    ("- {id: a, targets: [args], operator: {regex: x}, except: [{names: []}]}", "rule 'a': except[0].names: at least one"),
    ("- {id: a, targets: [args], operator: {regex: x}, except: [{names: [q], when: [x]}]}", "rule 'a': except[0].when: unknown key"),
    ("- {id: a, targets: [args]}", "rule 'a': operator: required"),
    ("- {targets: [args], operator: {regex: x}}", "rules[0]: id: required"),
    ("- {id: a, targets: [args], operator: {regex: x, glob: y}}", "rule 'a': operator.glob: unknown key"),
    ("- {id: a, targets: [args], operator: {regex: x}, chain: [{targets: [path], operator: {regex: '('}}]}",
     "rule 'a': chain[0].operator.regex: invalid pattern"),
    ("- {id: a, targets: [args], operator: {regex: x}}\n- {id: a, targets: [args], operator: {regex: y}}",
     "rule 'a': id: duplicate id"),
]


@pytest.mark.parametrize("rules,expected", BAD)
def test_load_error_names_file_rule_and_key(tmp_path, rules, expected):
    assert expected in load_error(tmp_path, rules)


def test_top_level_errors(tmp_path):
    assert "threshold: must be an integer >= 1" in load_error(tmp_path, GOOD_RULE, "name: t\nthreshold: 0\n")
    assert "extra: unknown key" in load_error(tmp_path, GOOD_RULE, "name: t\nextra: 1\n")
    path = tmp_path / "broken.yaml"
    path.write_text("rules: [\n")
    with pytest.raises(RuleError, match="invalid YAML"):
        RuleEngine.load(str(path))
    with pytest.raises(RuleError, match="cannot read"):
        RuleEngine.load(str(tmp_path / "missing.yaml"))


def test_error_format_of_the_packaged_ruleset_path(tmp_path, monkeypatch):
    import rules.engine as eng

    bad = tmp_path / "default.yaml"
    bad.write_text("rules:\n  - {id: sqli-libinjection, targets: [args], operator: {regex: '(?<=a)'}}\n")
    monkeypatch.setattr(eng, "DEFAULT_PATH", bad)
    with pytest.raises(RuleError) as err:
        RuleEngine.load()
    assert str(err.value).startswith("rules/default.yaml: rule 'sqli-libinjection': operator.regex: invalid pattern")


def test_valid_ruleset_loads_with_name_version_and_scores(tmp_path):
    path = write(
        tmp_path,
        GOOD_RULE
        + """
  - id: r2
    targets: [headers:User-Agent]
    operator: {phrases: [sqlmap]}
    severity: warning
  - id: r3
    targets: [path]
    operator: {regex: x}
    enabled: false
""",
    )
    engine = RuleEngine.load(path)
    assert engine.model == "rules:t@2"
    assert [r.id for r in engine.rules] == ["r1", "r2"]
    assert [r.score for r in engine.rules] == [5, 3]
    assert engine.rules[1].targets == ("headers:user-agent",)  # header names are case-insensitive


def test_packaged_ruleset_loads_and_uses_only_known_tags():
    from engine.labels import FEATURES

    engine = RuleEngine.load()
    assert engine.model.startswith("rules:clef-default@")
    assert len(engine.rules) > 50
    assert all(t in FEATURES for r in engine.rules for t in r.tags)
    assert len({r.id for r in engine.rules}) == len(engine.rules)
