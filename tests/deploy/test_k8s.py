"""deploy/k8s: every manifest valid against the Kubernetes schemas (kubernetes-validate ships them, so
this runs offline), the pieces pointing at each other, and the ConfigMap's gateway YAML accepted by the
gateway's own loader and `check-config`. No cluster is needed, and none was used.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gateway import cli
from gateway import config as configs
from tests.deploy.deployfiles import DEPLOY, dockerfile, documents, env_of, final_stage, mebibytes

K8S = DEPLOY / "k8s"
KUSTOMIZATION = yaml.safe_load((K8S / "kustomization.yaml").read_text())
MANIFESTS = [doc for name in KUSTOMIZATION["resources"] for doc in documents(K8S / name)]
# the oldest release still common in managed clusters, and the newest the package knows
VERSIONS = ["1.29.0", kubernetes_validate.latest_version() + ".0"]
IMAGE_ENV = env_of(final_stage(dockerfile()))


def one(kind: str, name: str = "clef-gateway") -> dict[str, Any]:
    (found,) = [d for d in MANIFESTS if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


DEPLOYMENT = one("Deployment")
POD = DEPLOYMENT["spec"]["template"]
(CONTAINER,) = POD["spec"]["containers"]
PORTS = {p["name"]: p["containerPort"] for p in CONTAINER["ports"]}
GATEWAY_YAML = one("ConfigMap")["data"]["gateway.yaml"]


def gateway_config() -> configs.Config:
    """The ConfigMap's file as the pod reads it: the image's environment, then the container's, over it."""
    container = {e["name"]: e["value"] for e in CONTAINER["env"] if "value" in e and e["name"] != "CLEF_CONFIG"}
    env = {**IMAGE_ENV, **container}
    return configs.from_dict(yaml.safe_load(GATEWAY_YAML), env=env)


def test_kustomization_lists_every_manifest():
    on_disk = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(KUSTOMIZATION["resources"]) == on_disk


@pytest.mark.parametrize("version", VERSIONS)
def test_every_manifest_is_valid_for_kubernetes(version):
    for doc in MANIFESTS:
        kubernetes_validate.validate(doc, version, strict=True)  # strict: an unknown field is an error


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed (kustomize build skipped)")
def test_kustomize_build_is_valid():
    out = subprocess.run(["kubectl", "kustomize", str(K8S)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    built = [d for d in yaml.safe_load_all(out.stdout) if d]
    assert sorted(d["kind"] for d in built) == sorted(d["kind"] for d in MANIFESTS)
    for doc in built:
        kubernetes_validate.validate(doc, VERSIONS[-1], strict=True)


def test_the_configmap_is_a_config_the_gateway_accepts(tmp_path, capsys):
    path = tmp_path / "gateway.yaml"
    path.write_text(GATEWAY_YAML)
    assert cli.main(["check-config", str(path)]) == 0
    assert ": ok (" in capsys.readouterr().out
    c = gateway_config()
    assert c.mode == "detect"  # a first rollout decides and annotates, never blocks
    assert c.model.enabled and c.cache.redis.enabled
    assert c.workers == 1  # one process per pod, sized by its requests; the autoscaler adds pods


def test_the_config_is_mounted_where_clef_config_points():
    (env,) = [e for e in CONTAINER["env"] if e["name"] == "CLEF_CONFIG"]
    path = Path(env["value"])
    (mount,) = [m for m in CONTAINER["volumeMounts"] if m["mountPath"] == str(path.parent)]
    (volume,) = [v for v in POD["spec"]["volumes"] if v["name"] == mount["name"]]
    assert volume["configMap"]["name"] == "clef-gateway" and path.name in one("ConfigMap")["data"]


def test_secrets_come_from_an_optional_secret_as_variables_the_gateway_reads():
    from_secret = [e for e in CONTAINER["env"] if "valueFrom" in e]
    assert {e["name"] for e in from_secret} == {"CLEF_ADMIN_TOKEN", "CLEF_REDIS_URL"} and set(configs.ENV) >= {
        e["name"] for e in from_secret}  # fmt: skip
    assert all(e["valueFrom"]["secretKeyRef"]["optional"] is True for e in from_secret)  # the pod starts without it
    assert gateway_config().admin.token == ""  # never in the ConfigMap


def test_ports_and_probes_follow_the_config():
    c = gateway_config()
    assert PORTS == {"proxy": c.listen.port, "admin": c.admin.listen.port}
    assert CONTAINER["readinessProbe"]["httpGet"] == {"path": "/health", "port": "admin"}
    # liveness must not be /health: a degraded pod (breaker open, model down) is not fixed by a restart
    liveness = CONTAINER["livenessProbe"]
    assert liveness.get("httpGet", {}).get("path") != "/health"
    assert liveness.get("tcpSocket", liveness.get("httpGet"))["port"] == "admin"
    assert CONTAINER["startupProbe"]["tcpSocket"]["port"] == "admin"
    service = one("Service")
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["proxy"]  # the admin API stays off it
    annotations = POD["metadata"]["annotations"]
    assert annotations["prometheus.io/port"] == str(c.admin.listen.port)


def test_redis_service_is_the_one_the_config_names():
    from yarl import URL

    url = URL(gateway_config().cache.redis.url)
    service = one("Service", url.host)
    assert url.port in [p["port"] for p in service["spec"]["ports"]]


def test_selectors_match_the_pods():
    labels = POD["metadata"]["labels"]
    assert DEPLOYMENT["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert one("Service")["spec"]["selector"].items() <= labels.items()
    assert one("PodDisruptionBudget")["spec"]["selector"]["matchLabels"].items() <= labels.items()
    redis_pod = one("Deployment", "clef-redis")["spec"]["template"]["metadata"]["labels"]
    assert one("Service", "clef-redis")["spec"]["selector"].items() <= redis_pod.items()


def test_autoscaler_and_disruption_budget_keep_replicas_up():
    hpa = one("HorizontalPodAutoscaler")["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "clef-gateway"}
    assert hpa["minReplicas"] == DEPLOYMENT["spec"]["replicas"] >= 2
    assert [m["resource"]["name"] for m in hpa["metrics"]] == ["cpu"]
    assert "requests" in CONTAINER["resources"] and "cpu" in CONTAINER["resources"]["requests"]  # HPA needs it
    assert one("PodDisruptionBudget")["spec"]["maxUnavailable"] == 1


def test_pods_run_unprivileged_on_a_read_only_root():
    pod, box = POD["spec"]["securityContext"], CONTAINER["securityContext"]
    assert pod["runAsNonRoot"] is True
    image_user = [i.args for i in final_stage(dockerfile()) if i.keyword == "USER"][0].split(":")[0]
    assert str(pod["runAsUser"]) == image_user
    assert box["readOnlyRootFilesystem"] is True and box["allowPrivilegeEscalation"] is False
    assert box["capabilities"]["drop"] == ["ALL"]
    assert "/tmp" in [m["mountPath"] for m in CONTAINER["volumeMounts"]]


def test_shutdown_drains_within_the_grace_period():
    sleep = CONTAINER["lifecycle"]["preStop"]["exec"]["command"]
    assert sleep[0] == "sleep"
    # preStop, then the gateway's own drain, then a few seconds to close the engine, before SIGKILL
    drain = gateway_config().shutdown.grace_s
    assert POD["spec"]["terminationGracePeriodSeconds"] >= int(sleep[1]) + drain + 5


def test_memory_covers_the_model_and_the_caches():
    c = gateway_config()
    resources = CONTAINER["resources"]
    model_mib, decision_cache_mib, runtime_mib = 400, 40 * c.cache.max_entries / 100_000, 100
    need = model_mib + c.cache.responses.max_bytes / 2**20 + decision_cache_mib + runtime_mib
    assert mebibytes(resources["limits"]["memory"]) >= need
    assert mebibytes(resources["requests"]["memory"]) >= need * 0.75
