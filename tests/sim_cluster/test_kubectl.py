"""The real kubectl 1.37 (the venv's) against the emulation with gangkeeper in it, as a user drives it.

The emulated API server with gangkeeper's webhook (in process) and its controller (over HTTP with
the official client, under deploy/'s RBAC: `tests.controller_e2e.emulation`), the emulated
scheduler and kubelet running in real time, and an HTTPS front end for kubectl as
kubernetes-admin. kubectl creates a namespace (a protobuf body), labels it for enforcement, applies
pods with validation on (OpenAPI v3, `fieldValidation=Strict`), reads Tables (pods with STATUS
`SchedulingGated`, nodes, Gangs with their printer columns, `-o wide`), describes a pod and a Gang
and finds gangkeeper's Events (selected by `involvedObject.uid`), waits for a pod to be Ready and
deletes one (a watch-list that must end).
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gangkeeper import names
from sim.api import ADMIN
from sim.clock import RealClock
from sim.cluster import ThreadRunner, emulated_cluster
from sim.deployed import DEPLOY_BASE
from sim.kubeconfig import write_kubeconfig
from sim.server import RunningServer
from sim.spec import load
from tests.controller_e2e.emulation import Emulation, eventually
from tests.sim.helpers import throwaway_certs

pytestmark = pytest.mark.e2e

KUBECTL = Path(sys.executable).parent / "kubectl"
NS = "ml"
SPEC = "nodes: [{count: 2, gpusPerNode: 8, namePrefix: gpu-node}]"


def group_pods(group: str, count: int, min_count: int) -> str:
    return "".join(f"""---
apiVersion: v1
kind: Pod
metadata:
  name: {group}-{index}
  namespace: {NS}
  labels: {{{names.GROUP_LABEL}: {group}}}
  annotations: {{{names.MIN_COUNT_ANNOTATION}: "{min_count}"}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: train
      image: busybox:1.36
      resources: {{limits: {{nvidia.com/gpu: "4"}}}}
""" for index in range(count))


class Kubectl:
    def __init__(self, kubeconfig: Path, cache: Path):
        self.base = [str(KUBECTL), "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache)]

    def run(self, *args: str, stdin: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
        return subprocess.run([*self.base, *args], input=stdin, capture_output=True, text=True, timeout=timeout)

    def __call__(self, *args: str, stdin: str | None = None, timeout: float = 30) -> str:
        result = self.run(*args, stdin=stdin, timeout=timeout)
        assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
        return result.stdout


def rows(output: str) -> tuple[list[str], dict[str, dict[str, str]]]:
    """The header's columns and each row's cells by column, cut where the header's columns start
    (a cell may be empty), rows by their first cell."""
    lines = output.rstrip().splitlines()
    starts = [m.start() for m in re.finditer(r"(?:^|(?<=\s{2}))\S", lines[0])]
    header = [lines[0][a:b].strip() for a, b in zip(starts, [*starts[1:], None])]
    table = {}
    for line in lines[1:]:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None])]
        table[cells[0]] = dict(zip(header, cells))
    return header, table


def gang_columns() -> list[str]:
    """The Gang CRD's printer columns, as kubectl heads them."""
    crd = yaml.safe_load((DEPLOY_BASE / "crd-gangs.yaml").read_text())
    (version,) = crd["spec"]["versions"]
    return ["NAME"] + [c["name"].upper() for c in version["additionalPrinterColumns"] if not c.get("priority")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("kubectl")
    emulation = Emulation(workdir)
    runner = ThreadRunner(emulated_cluster(emulation.api, RealClock(), spec=load(SPEC), start_delay=0.1),
                          idle_wait=0.05).start()
    emulation.controller()
    certs = throwaway_certs(workdir)
    admin = RunningServer(emulation.api, tokens={"admin-token": ADMIN}, certfile=str(certs["cert"]),
                          keyfile=str(certs["key"]))
    kubeconfig = write_kubeconfig(workdir / "admin.kubeconfig", admin.url, "admin-token", str(certs["ca"]))
    try:
        yield emulation, Kubectl(kubeconfig, workdir / "cache")
    finally:
        admin.stop()
        runner.stop()
        emulation.close()


def test_create_label_and_apply_with_validation(cluster):
    emulation, kubectl = cluster
    assert kubectl("create", "namespace", NS).strip() == f"namespace/{NS} created", "a protobuf body, read"
    assert "labeled" in kubectl("label", "namespace", NS, f"{names.ENFORCE_LABEL}=true")
    applied = kubectl("apply", "-f", "-", stdin=group_pods("duo", 2, 2) + group_pods("trio", 1, 3))
    assert applied.split() == ["pod/duo-0", "created", "pod/duo-1", "created", "pod/trio-0", "created"]
    refused = kubectl.run("apply", "-f", "-", stdin=group_pods("bad", 1, 1).replace("  containers:", "  colour: red\n"
                                                                                       "  containers:"))
    assert refused.returncode != 0 and 'strict decoding error: unknown field "spec.colour"' in refused.stderr, \
        refused.stderr


def test_get_shows_the_real_columns(cluster):
    emulation, kubectl = cluster
    eventually(lambda: len(emulation.api.list("gangs", namespace=NS)) == 2, what="both Gangs")
    assert kubectl("wait", "--for=condition=Ready", "pod/duo-0", "pod/duo-1", "-n", NS, "--timeout=30s",
                   timeout=40).count("condition met") == 2
    header, pods = rows(kubectl("get", "pods", "-n", NS))
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert (pods["trio-0"]["READY"], pods["trio-0"]["STATUS"]) == ("0/1", "SchedulingGated")
    assert (pods["duo-0"]["READY"], pods["duo-0"]["STATUS"]) == ("1/1", "Running")
    header, wide = rows(kubectl("get", "pods", "-n", NS, "-o", "wide"))
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES"]
    assert wide["duo-0"]["NODE"].startswith("gpu-node-") and wide["duo-0"]["IP"].startswith("10.")
    assert (wide["trio-0"]["IP"], wide["trio-0"]["NODE"]) == ("<none>", "<none>")
    header, nodes = rows(kubectl("get", "nodes"))
    assert header == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"] and nodes["gpu-node-0"]["STATUS"] == "Ready"
    header, gangs = rows(kubectl("get", "gangs", "-n", NS))
    assert header == gang_columns()
    by_min = {cells["MIN"]: cells for cells in gangs.values()}
    assert (by_min["3"]["PHASE"], by_min["3"]["PRESENT"], by_min["3"]["GPUS"]) == ("Waiting", "1", "4"), gangs
    assert (by_min["2"]["PHASE"], by_min["2"]["PRESENT"], by_min["2"]["GPUS"]) == ("Running", "2", "8"), gangs


def test_describe_shows_gangkeepers_events(cluster):
    emulation, kubectl = cluster
    eventually(lambda: any(e["reason"] == "Released" and e["involvedObject"]["name"] == "duo-0"
                           for e in emulation.api.list("events", namespace=NS)), what="the Released Event")
    described = kubectl("describe", "pod", "duo-0", "-n", NS)
    events = described.split("Events:", 1)[1]
    assert "Released" in events and "gangkeeper-controller" in events, described
    trio = next(g for g in emulation.api.list("gangs", namespace=NS) if g["status"]["minCount"] == 3)
    described = kubectl("describe", "gang", trio["metadata"]["name"], "-n", NS)
    assert "Incomplete" in described.split("Events:", 1)[1], described
    for event in emulation.api.list("events", namespace=NS):
        involved = event["involvedObject"]
        assert involved["uid"] and involved["namespace"] == NS and involved["apiVersion"], involved


def test_delete_returns_once_the_pod_is_gone(cluster):
    emulation, kubectl = cluster
    deleted = kubectl("delete", "pod", "duo-1", "-n", NS, timeout=30)
    assert deleted.strip() == f'pod "duo-1" deleted from {NS} namespace'
    assert "duo-1" not in {p["metadata"]["name"] for p in emulation.api.list("pods", namespace=NS)}
