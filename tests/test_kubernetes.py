"""deploy/kubernetes/: every overlay renders with the real kustomize (`kubectl kustomize`) and
its objects pass kubernetes-validate --strict; the pieces agree (ports, selectors, volumes).

Skipped when kubectl or kubernetes-validate is missing, unless RECOMMENDER_REQUIRE_KUBERNETES
is set, as in CI.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy" / "kubernetes"
OVERLAYS = ("postgresql", "sqlite", "ryax")
# The oldest Kubernetes with native gRPC probes on by default and GA (1.27), and the newest
# the validator knows.
VERSIONS = ("1.27.0", None)


def _validator() -> list[str] | None:
    exe = shutil.which("kubernetes-validate") or str(Path(sys.executable).parent /
                                                     "kubernetes-validate")
    return [exe] if Path(exe).exists() else None


def _missing() -> str | None:
    if shutil.which("kubectl") is None:
        return "kubectl not installed (it renders the kustomizations)"
    if _validator() is None:
        return "kubernetes-validate not installed (pip install kubernetes-validate)"
    return None


if (why := _missing()) is not None:
    if os.environ.get("RECOMMENDER_REQUIRE_KUBERNETES"):
        raise RuntimeError(f"RECOMMENDER_REQUIRE_KUBERNETES is set but {why}")
    pytest.skip(why, allow_module_level=True)


@cache
def rendered(overlay: str) -> str:
    path = DEPLOY / ("base" if overlay == "base" else f"overlays/{overlay}")
    out = subprocess.run(["kubectl", "kustomize", str(path)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def objects(overlay: str) -> list[dict[str, Any]]:
    return [o for o in yaml.safe_load_all(rendered(overlay)) if o]


def one(objs: list[dict[str, Any]], kind: str, name: str = "intelliscale-recommender"
        ) -> dict[str, Any]:
    (found,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def validate(paths: list[Path], version: str | None) -> subprocess.CompletedProcess[str]:
    validator = _validator()
    assert validator is not None
    args = [*validator, "--strict", "--quiet", *(["-k", version] if version else []),
            *map(str, paths)]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("version", VERSIONS)
def test_renders_and_validates_strictly(version: str | None, tmp_path: Path) -> None:
    """The base, every overlay and the Secret example, in one validator run per version."""
    paths = [DEPLOY / "secret.example.yaml"]
    for overlay in ("base", *OVERLAYS):
        paths.append(tmp_path / f"{overlay}.yaml")
        paths[-1].write_text(rendered(overlay))
    out = validate(paths, version)
    assert out.returncode == 0, out.stdout + out.stderr
    # Only the ServiceMonitor (a CRD) is beyond the validator's schemas; checked below.
    for line in (out.stdout + out.stderr).splitlines():
        assert "ServiceMonitor" in line or not line.startswith(("WARN", "ERROR")), line


def test_strict_validation_rejects_an_unknown_field(tmp_path: Path) -> None:
    """The check above can fail: a misspelt field is an error under --strict."""
    deployment = one(objects("postgresql"), "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(deployment))
    assert validate([path], None).returncode != 0


def ports_of(objs: list[dict[str, Any]]) -> dict[str, Any]:
    """Every place a port number appears, by what it is."""
    dep = one(objs, "Deployment")
    pod = dep["spec"]["template"]
    (c,) = pod["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    container = {p["name"]: p["containerPort"] for p in c["ports"]}
    service = {p["name"]: p for p in one(objs, "Service")["spec"]["ports"]}
    headless = {p["name"]: p for p in
                one(objs, "Service", "intelliscale-recommender-headless")["spec"]["ports"]}
    return {
        "grpc": {container["grpc"], int(env["RECOMMENDER_PORT"]),
                 c["startupProbe"]["grpc"]["port"], c["readinessProbe"]["grpc"]["port"],
                 c["livenessProbe"]["grpc"]["port"], service["grpc"]["port"],
                 headless["grpc"]["port"]},
        "metrics": {container["metrics"], int(env["RECOMMENDER_METRICS_PORT"]),
                    int(pod["metadata"]["annotations"]["prometheus.io/port"]),
                    service["metrics"]["port"]},
        "targets": {service["grpc"]["targetPort"], service["metrics"]["targetPort"]},
    }


@pytest.mark.parametrize("overlay", ["postgresql", "sqlite", "ryax"])
def test_the_servers_and_the_retraining_job_share_the_price_of_an_oom(overlay: str) -> None:
    """One ConfigMap sets RECOMMENDER_OOM_WAIT_GPUS for both: the job scores candidates at
    the price the servers weigh, and a price set on one alone would promote for another trade
    than the servers make."""
    objs = objects(overlay)
    (settings,) = [o for o in objs if o["kind"] == "ConfigMap"
                   and o["metadata"]["name"].startswith("intelliscale-recommender-settings")]
    assert float(settings["data"]["RECOMMENDER_OOM_WAIT_GPUS"]) == 5.0
    server = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    cron = one(objs, "CronJob", "intelliscale-recommender-retrain")
    job = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    for container in (server, job):
        refs = [e["configMapRef"]["name"] for e in container.get("envFrom", [])]
        assert refs == [settings["metadata"]["name"]], container["name"]
        assert "RECOMMENDER_OOM_WAIT_GPUS" not in {e["name"] for e in container["env"]}


@pytest.mark.parametrize(("overlay", "grpc", "metrics"),
                         [("postgresql", 50051, 9464), ("sqlite", 50051, 9464),
                          ("ryax", 8326, 8090)])
def test_ports_are_set_in_one_place(overlay: str, grpc: int, metrics: int) -> None:
    objs = objects(overlay)
    ports = ports_of(objs)
    assert ports["grpc"] == {grpc}
    assert ports["metrics"] == {metrics}
    assert ports["targets"] == {"grpc", "metrics"}  # by name: they follow the container
    maps = [o["metadata"]["name"] for o in objs if o["kind"] == "ConfigMap"]
    assert not [m for m in maps if "ports" in m]  # the ports' source stays local
    for policy in (o for o in objs if o["kind"] == "NetworkPolicy"):
        for rule in policy["spec"]["ingress"]:
            assert {p["port"] for p in rule["ports"]} <= {"grpc", "metrics"}


def labels_match(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if not all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        if (labels.get(e["key"]) in e["values"]) != (e["operator"] == "In"):
            return False
    return True


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_selectors_reach_their_pods(overlay: str) -> None:
    objs = objects(overlay)
    server = one(objs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    retrain = one(objs, "CronJob", "intelliscale-recommender-retrain")["spec"]["jobTemplate"][
        "spec"]["template"]["metadata"]["labels"]
    for name in ("intelliscale-recommender", "intelliscale-recommender-headless"):
        assert labels_match({"matchLabels": one(objs, "Service", name)["spec"]["selector"]},
                            server)
    policy = one(objs, "NetworkPolicy")["spec"]["podSelector"]
    assert labels_match(policy, server) and not labels_match(policy, retrain)
    jobs = one(objs, "NetworkPolicy", "intelliscale-recommender-jobs")["spec"]["podSelector"]
    assert labels_match(jobs, retrain) and not labels_match(jobs, server)
    for pdb in (o for o in objs if o["kind"] == "PodDisruptionBudget"):
        assert labels_match(pdb["spec"]["selector"], server)


def test_service_monitor_scrapes_the_metrics_port() -> None:
    objs = objects("ryax")
    monitor = one(objs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    services = [o for o in objs if o["kind"] == "Service"
                and labels_match(monitor["spec"]["selector"], o["metadata"]["labels"])]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["path"] == "/metrics"
    with_port = [s for s in services
                 if endpoint["port"] in {p["name"] for p in s["spec"]["ports"]}]
    assert [s["metadata"]["name"] for s in with_port] == ["intelliscale-recommender"]


def test_sqlite_overlay_is_one_replica_on_a_claim() -> None:
    objs = objects("sqlite")
    dep = one(objs, "Deployment")
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["strategy"] == {"type": "Recreate"}  # never two writers on the file
    kinds = {o["kind"] for o in objs}
    assert "PodDisruptionBudget" not in kinds and "Job" not in kinds
    claim = one(objs, "PersistentVolumeClaim", "intelliscale-recommender-data")
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    cron = one(objs, "CronJob", "intelliscale-recommender-retrain")
    for pod in (dep["spec"]["template"]["spec"],
                cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]):
        (c,) = pod["containers"]
        env = {e["name"]: e for e in c["env"]}
        url = env["RECOMMENDER_DATABASE_URL"]
        assert "valueFrom" not in url
        mount = next(m for m in c["volumeMounts"] if m["name"] == "data")
        assert url["value"] == f"sqlite:///{mount['mountPath']}/recommender.db"
        volume = next(v for v in pod["volumes"] if v["name"] == "data")
        assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
        assert pod["securityContext"]["fsGroup"] == 10001  # the claim is writable by uid 10001
    affinity = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["affinity"]
    (term,) = affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert labels_match(term["labelSelector"], dep["spec"]["template"]["metadata"]["labels"])


@pytest.mark.parametrize("overlay", ("postgresql", "ryax"))
def test_postgresql_overlays_are_replicas_on_a_secret(overlay: str) -> None:
    objs = objects(overlay)
    dep = one(objs, "Deployment")
    assert dep["spec"]["replicas"] >= 2
    assert one(objs, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    secrets = yaml.safe_load_all((DEPLOY / "secret.example.yaml").read_text())
    keys = {(s["metadata"]["name"], k) for s in secrets for k in s["stringData"]}
    for workload in (dep["spec"]["template"]["spec"],
                     one(objs, "CronJob", "intelliscale-recommender-retrain")["spec"][
                         "jobTemplate"]["spec"]["template"]["spec"],
                     one(objs, "Job", "intelliscale-recommender-migrate")["spec"]["template"][
                         "spec"]):
        (c,) = workload["containers"]
        ref = next(e for e in c["env"]
                   if e["name"] == "RECOMMENDER_DATABASE_URL")["valueFrom"]["secretKeyRef"]
        assert (ref["name"], ref["key"]) in keys
