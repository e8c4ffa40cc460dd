from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from gateway import config as configs
from gateway.config import Address, Config
from gateway.errors import ConfigError

EXAMPLE = Path(__file__).parents[2] / "deploy" / "gateway.example.yaml"


def load_text(tmp_path: Path, text: str, env: dict[str, str] | None = None, **overrides) -> Config:
    path = tmp_path / "gateway.yaml"
    path.write_text(text)
    return configs.load(path, env=env or {}, overrides=overrides)


def test_defaults():
    c = configs.load(None, env={})
    assert c == Config()
    assert (c.listen, c.admin.listen) == (Address("127.0.0.1", 8080), Address("127.0.0.1", 9901))
    assert (c.model.timeout_ms, c.model.inspect_bytes) == (800.0, 1 << 20)
    assert (c.cache.ttl_s, c.breaker.failures_to_open, c.breaker.reset_after_s) == (600.0, 5, 30.0)
    assert (c.actions.block.action, c.actions.cache.action, c.actions.allow.action) == ("block", "cache", "forward")


def test_example_loads_with_every_default():
    c = configs.load(EXAMPLE, env={})
    assert c == dataclasses.replace(Config(), origin=dataclasses.replace(Config().origin, url="http://127.0.0.1:3000"))


def test_example_spells_out_every_key():
    def keys(cls, prefix=""):
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            key = f"{prefix}{f.name}"
            yield key
            if dataclasses.is_dataclass(f.default) and not isinstance(f.default, Address) and f.name != "routes":
                yield from keys(type(f.default), key + ".")

    raw = yaml.safe_load(EXAMPLE.read_text())

    def present(key):
        node = raw
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    assert [k for k in keys(Config) if not present(k)] == []


@pytest.mark.parametrize(
    "text, message",
    [
        ("breaker: {failures_to_open: 0}", "breaker.failures_to_open: must be > 0, got 0"),
        ("breaker: {failures_to_open: five}", "breaker.failures_to_open: must be an integer, got string 'five'"),
        ("bogus: 1", "bogus: unknown key"),
        ("model: {timeout: 5}", "model.timeout: unknown key"),
        ("model: {timeout_ms: -1}", "model.timeout_ms: must be > 0, got -1.0"),
        ("model: {inspect_bytes: true}", "model.inspect_bytes: must be an integer, got boolean True"),
        ("model: {bundle: /nowhere/at/all}", "model.bundle: must be an existing folder, got '/nowhere/at/all'"),
        ("listen: localhost", "listen: must be HOST:PORT, got 'localhost'"),
        ("admin: {listen: '1.2.3.4:99999'}", "admin.listen: must be HOST:PORT, got '1.2.3.4:99999'"),
        ("origin: {url: 'ftp://x'}", "origin.url: must be an http:// or https:// URL without a query"),
        ("origin: {host: client}", "origin.host: must be origin or preserve, got 'client'"),
        ("mode: audit", "mode: must be enforce or detect, got 'audit'"),
        ("rules: {asset_probes: sometimes}", "rules.asset_probes: must be true or false, got string 'sometimes'"),
        ("model: {routing: rules}", "model.routing: must be one of auto, policy, model, got 'rules'"),
        ("actions: {block: {action: drop}}", "actions.block.action: must be one of block, forward, cache"),
        ("actions: {allow: {min_confidence: 1.5}}", "actions.allow.min_confidence: must be between 0 and 1"),
        ("actions: {block_response: {status: 200}}", "actions.block_response.status: must be a 4xx or 5xx"),
        ("actions: {maybe: {action: block}}", "actions.maybe: unknown key"),
        ("routes: [{prefix: api}]", "routes[0].prefix: must start with /, got 'api'"),
        ("routes: [{prefix: /a}, {prefix: /b, mode: x}]", "routes[1].mode: must be enforce or detect"),
        ("routes: [{prefix: /a, actions: {block: {min_confidence: 2}}}]", "routes[0].actions.block.min_confidence:"),
        ("routes: {prefix: /a}", "routes: must be a list, got mapping"),
        ("headers: {echo: 'yes'}", "headers.echo: must be true or false, got string 'yes'"),
        ("limits: {max_body_bytes: -1}", "limits.max_body_bytes: must be >= 0, got -1"),
        ("rules: {overrides: [deny]}", "rules.overrides[0]: must be a mapping of keys, got string"),
        ("logging: {level: loud}", "logging.level: must be one of debug, info, warning, error"),
        ("cache: 5", "cache: must be a mapping of keys, got integer"),
        ("cache: {responses: {max_bytes: -1}}", "cache.responses.max_bytes: must be >= 0, got -1"),
        ("cache: {responses: {max_bytes: 10, max_object_bytes: 20}}", "cache.responses.max_object_bytes: must be <="),
        ("cache: {responses: {default_ttl_s: -5}}", "cache.responses.default_ttl_s: must be >= 0"),
        ("cache: {responses: {statuses: [200, 999]}}", "cache.responses.statuses[1]: must be a 2xx-5xx status"),
        ("cache: {responses: {statuses: 200}}", "cache.responses.statuses: must be a list, got integer"),
        ("cache: {responses: {ignore_cookies_under: [static]}}", "cache.responses.ignore_cookies_under[0]: must start"),
        ("cache: {responses: {key: {query: sort}}}", "cache.responses.key.query: must be one of sorted, as_sent"),
        ("cache: {responses: {key: {headers: ['a b']}}}", "cache.responses.key.headers[0]: must be an HTTP header"),
        ("cache: {responses: {ttl: 1}}", "cache.responses.ttl: unknown key"),
        ("logging: {sample_allowed: 2}", "logging.sample_allowed: must be between 0 and 1, got 2.0"),
        ("- a\n- b", "config: must be a mapping of keys, got list"),
    ],
)
def test_bad_values_name_the_full_key(tmp_path, text, message):
    with pytest.raises(ConfigError) as err:
        load_text(tmp_path, text)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_yaml_syntax_error_is_one_line_naming_the_file(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_text(tmp_path, "listen: [unclosed\n")
    assert "gateway.yaml: not valid YAML at line" in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        configs.load(tmp_path / "absent.yaml", env={})


def test_environment_overrides_file_and_flags_override_both(tmp_path):
    env = {
        "CLEF_ORIGIN": "http://env.example:81",
        "CLEF_LISTEN": "0.0.0.0:8000",
        "CLEF_ADMIN": "127.0.0.1:9000",
        "CLEF_MODEL_BUNDLE": str(tmp_path),
    }
    c = load_text(tmp_path, "origin: {url: 'http://file.example'}\nlisten: 127.0.0.1:1\n", env=env)
    assert c.origin.url == "http://env.example:81"
    assert c.listen == Address("0.0.0.0", 8000)
    assert c.admin.listen == Address("127.0.0.1", 9000)
    assert c.model.bundle == str(tmp_path)
    c = load_text(tmp_path, "", env=env, **{"origin.url": "http://flag.example", "listen": "[::1]:8443"})
    assert c.origin.url == "http://flag.example"
    assert c.listen == Address("::1", 8443) and str(c.listen) == "[::1]:8443"


def test_bad_environment_value_names_the_variable(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_text(tmp_path, "", env={"CLEF_LISTEN": "nowhere"})
    assert str(err.value) == "listen (from CLEF_LISTEN): must be HOST:PORT, got 'nowhere'"


def test_a_digit_that_is_not_a_number_names_the_variable(tmp_path):
    assert load_text(tmp_path, "", env={"CLEF_WORKERS": " 2 "}).workers == 2
    for text in ("²", "٣", "2x"):  # str.isdigit() says yes to the first, int() reads the second
        with pytest.raises(ConfigError, match=r"\(from CLEF_WORKERS\)"):
            load_text(tmp_path, "", env={"CLEF_WORKERS": text})
        with pytest.raises(ConfigError, match="must be HOST:PORT"):
            load_text(tmp_path, "", env={"CLEF_LISTEN": f"127.0.0.1:{text}"})


def test_routes_inherit_the_action_map_and_mode(tmp_path):
    c = load_text(
        tmp_path,
        """
mode: detect
actions: {block: {min_confidence: 0.5}}
routes:
  - {prefix: /api/, actions: {block: {min_confidence: 0.9}}}
  - {prefix: /api/admin/, mode: enforce}
""",
    )
    assert c.route("/api/items").actions.block == configs.LabelAction("block", 0.9, "forward")
    assert c.route("/api/items").mode == "detect"
    assert c.route("/api/admin/users").mode == "enforce"
    assert c.route("/api/admin/users").actions.block.min_confidence == 0.5
    assert c.route("/elsewhere") == configs.Route("/", "detect", c.actions)


def test_engine_settings_carry_the_engine_keys(tmp_path):
    c = load_text(
        tmp_path,
        "model: {threads: 2, timeout_ms: 250, max_tokens: 512}\ncache: {ttl_s: 5}\nbreaker: {failures_to_open: 3}",
    )
    s = c.engine_settings()
    assert (s.threads, s.timeout_ms, s.max_tokens, s.cache_ttl_s, s.failures_to_open) == (2, 250.0, 512, 5.0, 3)
    assert (s.bundle, s.rules, s.reset_after_s, s.disabled) == (None, None, 30.0, False)


def test_model_enabled_false_disables_decisions(tmp_path):
    assert load_text(tmp_path, "model: {enabled: false}").engine_settings().disabled is True


def test_serving_requires_an_origin():
    with pytest.raises(ConfigError, match=r"^origin.url: required"):
        configs.load(None, env={}).require_origin()
