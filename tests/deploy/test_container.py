"""deploy/Dockerfile, .dockerignore, deploy/compose.yaml and deploy/prometheus.yml.

There is no Docker engine where these tests run, so nothing is built: the tests read the files and hold
them to the gateway's own config loader (the ports and addresses they set are the ones it reads), and
run the image's HEALTHCHECK command against a real admin listener.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import tomllib
import zipfile

import pytest
import yaml

from gateway import config as configs
from gateway.server import running
from tests.deploy.deployfiles import (
    DEPLOY,
    ROOT,
    docker_ignored,
    dockerfile,
    env_of,
    final_stage,
)
from tests.factories import FakeModel, make_config

INSTRUCTIONS = dockerfile()
FINAL = final_stage(INSTRUCTIONS)
ENV = env_of(FINAL)
COMPOSE = yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def only(keyword: str) -> str:
    found = [ins.args for ins in FINAL if ins.keyword == keyword]
    assert len(found) == 1, f"expected one {keyword} in the final stage, found {found}"
    return found[0]


def test_the_image_is_slim_python_and_runs_as_a_user_of_its_own():
    assert only("FROM") == "python:3.11-slim"
    user = only("USER").split(":")[0]
    assert user not in ("root", "0") and int(user) >= 1000
    # after the installs (they need root), before the entrypoint
    assert FINAL.index(next(i for i in FINAL if i.keyword == "USER")) > max(
        n for n, i in enumerate(FINAL) if i.keyword == "RUN"
    )


def test_it_installs_the_package_with_its_bundle_and_no_train_extra():
    text = " ".join(ins.args for ins in INSTRUCTIONS)  # the instructions, not the comments
    assert "train" not in text and "torch" not in text and "curl" not in text
    runs = " ".join(ins.args for ins in FINAL if ins.keyword == "RUN")
    assert "pip install" in runs and "clef-gateway" in runs and "--no-index" in runs
    copies = [ins.args.split() for ins in INSTRUCTIONS if ins.keyword == "COPY"]
    assert {"engine/", "gateway/", "rules/"} <= {part for args in copies for part in args}
    # the bundle travels inside the engine package (package-data), so the wheel carries it
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "bundles/default/*" in package_data["engine"]


def test_the_wheel_the_image_installs_carries_every_packaged_file(tmp_path):
    """The build stage's `pip wheel .`, on the build context .dockerignore lets through: the wheel must
    hold every module and every data file the packages read at run time (the model bundle, the rules and
    their phrase lists), or the container fails at start where the checkout works."""
    git = ["git", "ls-files", "gateway", "engine", "rules"]
    listed = subprocess.run(git, cwd=ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: cannot tell tracked files from local ones")
    tracked = [f for f in listed.stdout.split() if not f.endswith("README.md")]
    context = tmp_path / "context"
    for name in [*tracked, "pyproject.toml", "README.md"]:
        if not docker_ignored(name):
            (context / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, context / name)
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path)]
    build = subprocess.run([*pip, str(context)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = tmp_path.glob("clef_gateway-*.whl")
    assert sorted(set(tracked) - set(zipfile.ZipFile(wheel).namelist())) == []


def test_entrypoint_is_serve_and_env_defaults_are_variables_the_gateway_reads():
    assert json.loads(only("ENTRYPOINT")) == ["clef-gateway", "serve"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert "clef-gateway" in scripts
    clef = {k for k in ENV if k.startswith("CLEF_")}
    assert clef and clef <= set(configs.ENV) | {"CLEF_CONFIG"}
    assert (ENV["CLEF_LISTEN"], ENV["CLEF_ADMIN"]) == ("0.0.0.0:8080", "0.0.0.0:9901")


def test_exposed_ports_are_the_configured_listeners():
    c = configs.from_dict({}, env=ENV)
    assert {str(c.listen.port), str(c.admin.listen.port)} == set(only("EXPOSE").split())
    assert c.listen.host == c.admin.listen.host == "0.0.0.0"  # reachable from outside the container


@pytest.mark.parametrize(
    "path, ignored",
    [
        ("pyproject.toml", False),
        ("README.md", False),
        ("gateway/app.py", False),
        ("engine/decide.py", False),
        ("engine/bundles/default/model.onnx", False),
        ("rules/default.yaml", False),
        (".venv/bin/python", True),
        (".git/HEAD", True),
        ("tests/conftest.py", True),
        ("bench/model.py", True),
        ("engine/__pycache__/decide.cpython-311.pyc", True),
        ("engine/bundles/candidate/model.onnx", True),
        ("work/corpus/train.jsonl", True),
    ],
)
def test_the_build_context_holds_the_sources_and_nothing_else(path, ignored):
    assert docker_ignored(path) is ignored


@pytest.mark.parametrize("bundle_ok", [True, False])
async def test_healthcheck_command_follows_health(tmp_path, bundle_ok):
    """The HEALTHCHECK's own command line, run against a real admin listener: 0 while /health says ok,
    non-zero when it answers 503 (here, a bundle that does not load)."""
    command = json.loads(only("HEALTHCHECK").split("CMD", 1)[1])
    assert command[0] == "python"
    raw = {"listen": "127.0.0.1:0", "admin": {"listen": "127.0.0.1:0"}}
    if not bundle_ok:
        raw["model"] = {"bundle": str(tmp_path)}
    async with running(make_config(raw), model=FakeModel() if bundle_ok else None) as gw:
        port = gw.admin_url.rpartition(":")[2]
        proc = await asyncio.create_subprocess_exec(sys.executable, *command[1:], env={"CLEF_ADMIN": f"0.0.0.0:{port}"},
                                                    stderr=asyncio.subprocess.DEVNULL)  # fmt: skip
        assert (await asyncio.wait_for(proc.wait(), 30) == 0) is bundle_ok


def test_compose_has_the_stack():
    assert set(COMPOSE["services"]) == {"gateway", "origin", "redis", "prometheus"}
    build = COMPOSE["services"]["gateway"]["build"]
    assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"


def test_compose_ports_and_addresses_agree_with_the_gateway_config():
    services = COMPOSE["services"]
    gateway = services["gateway"]
    env = {**ENV, **{k: str(v) for k, v in gateway["environment"].items()}}
    c = configs.from_dict({}, env=env)
    published = {int(p.rsplit(":", 1)[1]): p for p in gateway["ports"]}
    assert set(published) == {c.listen.port, c.admin.listen.port}
    assert published[c.admin.listen.port].startswith("127.0.0.1:")  # the admin API stays on the host
    origin = host_port(c.origin.url)
    assert origin[0] == "origin" and str(origin[1]) in services["origin"]["expose"]
    redis = host_port(c.cache.redis.url)
    assert redis[0] == "redis" and str(redis[1]) in services["redis"]["expose"]
    assert set(gateway["depends_on"]) == {"origin", "redis"}


def test_prometheus_scrapes_the_admin_metrics():
    mount = COMPOSE["services"]["prometheus"]["volumes"][0].split(":")
    prometheus = yaml.safe_load((DEPLOY / mount[0]).read_text())
    (job,) = prometheus["scrape_configs"]
    env = {**ENV, **{k: str(v) for k, v in COMPOSE["services"]["gateway"]["environment"].items()}}
    admin = configs.from_dict({}, env=env).admin.listen
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == [f"gateway:{admin.port}"]


def host_port(url: str) -> tuple[str, int]:
    from yarl import URL

    u = URL(url)
    return u.host, u.port
