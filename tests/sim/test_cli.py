"""`gangkeeper sim serve` as a person uses it: start it, point kubectl at it, watch pods run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from demo.processes import free_port

KUBECTL = Path(sys.executable).parent / "kubectl"
SPEC = """
nodes: [{count: 2, gpusPerNode: 8, namePrefix: gpu-node}]
workloads:
  - {kind: PyTorchJob, name: tiny, namespace: default, size: 3, gpusPerPod: 1, durationSeconds: 3600}
"""
PROVISIONING = """
apiVersion: v1
kind: PodTemplate
metadata: {name: worker, namespace: default}
template:
  spec:
    containers: [{name: main, image: busybox:1.36, resources: {limits: {nvidia.com/gpu: "8"}}}]
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: job, namespace: default}
spec:
  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: worker}, count: 2}]
"""


def kubectl(kubeconfig: Path, *args: str) -> dict:
    result = subprocess.run([str(KUBECTL), "--kubeconfig", str(kubeconfig), *args, "-o", "json"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def served(tmp_path):
    spec = tmp_path / "cluster.yaml"
    spec.write_text(SPEC)
    kubeconfig = tmp_path / "sim.kubeconfig"
    process = subprocess.Popen([sys.executable, "-m", "gangkeeper.cli", "sim", "serve", "--tls", "--spec", str(spec),
                                "--port", str(free_port()), "--kubeconfig-out", str(kubeconfig)],
                               stdout=subprocess.PIPE, stderr=(tmp_path / "sim.log").open("w"), text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        banner = process.stdout.readline()
        assert banner.startswith("emulated cluster at https://127.0.0.1:"), banner
        yield kubeconfig
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=15) == 0


@pytest.mark.e2e
def test_kubectl_sees_the_nodes_and_the_pods_the_scheduler_bound(served):
    nodes = kubectl(served, "get", "nodes")["items"]
    assert sorted(node["metadata"]["name"] for node in nodes) == ["gpu-node-0", "gpu-node-1"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        pods = kubectl(served, "get", "pods", "-A")["items"]
        if len(pods) == 3 and all(pod["status"].get("phase") == "Running" for pod in pods):
            break
        time.sleep(0.2)
    assert len(pods) == 3 and {pod["status"]["phase"] for pod in pods} == {"Running"}, pods


@pytest.mark.e2e
def test_the_controller_kubeconfig_authenticates_as_the_controller_under_deploys_rbac(served):
    """The controller's kubeconfig carries its own token; the server maps it to the controller's
    service account (what the webhook checks before letting a gate go) and authorizes it by
    deploy/'s RBAC: pods everywhere, no Secrets."""
    controller = Path(f"{served}.controller")
    assert kubectl(controller, "get", "pods", "-A")["items"] is not None
    refused = subprocess.run([str(KUBECTL), "--kubeconfig", str(controller), "get", "--raw", "/api/v1/secrets"],
                             check=False, capture_output=True, text=True, timeout=30)
    assert refused.returncode != 0 and 'User "system:serviceaccount:gangkeeper:gangkeeper-controller" cannot list ' \
        'resource "secrets" in API group "" at the cluster scope' in refused.stderr, refused.stderr
    assert json.loads(controller.read_text())["users"][0]["user"]["token"] != \
        json.loads(served.read_text())["users"][0]["user"]["token"]


def test_a_bad_webhook_route_says_what_to_write(capsys):
    from gangkeeper.cli import main

    with pytest.raises(SystemExit):
        main(["sim", "serve", "--webhook-route", "webhook:443"])
    assert "write SERVICE.NAMESPACE.svc:PORT=HOST:PORT" in capsys.readouterr().err


def test_a_bad_spec_is_refused_with_every_problem(tmp_path, capsys):
    from gangkeeper.cli import main

    spec = tmp_path / "bad.yaml"
    spec.write_text("nodes: [{count: -1, gpusPerNode: 8}]\nworkloads: [{kind: TFJob, name: x}]\n")
    assert main(["sim", "serve", "--spec", str(spec), "--port", str(free_port()),
                 "--kubeconfig-out", str(tmp_path / "k")]) == 2


def serve_arguments(*argv: str):
    from gangkeeper.cli import build_parser

    return build_parser(["sim"]).parse_args(["sim", "serve", *argv])


def test_run_seconds_are_unset_unless_given_by_flag_or_environment(monkeypatch):
    assert serve_arguments().run_seconds is None, "pods run until stopped, as before the flag"
    assert serve_arguments("--run-seconds", "2.5").run_seconds == 2.5
    monkeypatch.setenv("GANGKEEPER_SIM_RUN_SECONDS", "30")
    assert serve_arguments().run_seconds == 30.0


def test_run_seconds_that_are_not_a_positive_number_are_refused_naming_the_flag(capsys):
    with pytest.raises(SystemExit):
        serve_arguments("--run-seconds", "0")
    assert "argument --run-seconds: '0' is not a positive number (e.g. 30 or 2.5)" in capsys.readouterr().err


def test_node_groups_are_read_from_their_flag_seconds_left_to_the_specs_default():
    assert serve_arguments().node_group == []
    assert serve_arguments("--node-group", "gpu-pool:8:4:30", "--node-group", "cpu:0:2").node_group == [
        {"name": "gpu-pool", "gpusPerNode": 8, "max": 4, "provisioningSeconds": 30.0},
        {"name": "cpu", "gpusPerNode": 0, "max": 2}]


@pytest.mark.parametrize(("value", "problem"), [
    ("gpu-pool:8", "2 parts, not 3 or 4"),
    ("GPU:8:4", "NAME 'GPU' is not a DNS label (lowercase letters, digits and '-')"),
    ("gpu:eight:4", "GPUS_PER_NODE 'eight' is not a whole number from 0 to 64"),
    ("gpu:8:0", "MAX '0' is not a whole number from 1 to 1000"),
    ("gpu:8:4:soon", "PROVISIONING_SECONDS 'soon' is not a number of seconds, 0 or more"),
    ("gpu:8:4:-1", "PROVISIONING_SECONDS '-1' is not a number of seconds, 0 or more"),
])
def test_a_bad_node_group_is_refused_naming_the_part_and_what_to_write(capsys, value, problem):
    with pytest.raises(SystemExit):
        serve_arguments("--node-group", value)
    assert f"argument --node-group: {value!r} is not a node group: {problem}; write " \
           "NAME:GPUS_PER_NODE:MAX[:PROVISIONING_SECONDS], e.g. gpu-pool:8:4:60" in capsys.readouterr().err


@pytest.mark.e2e
def test_a_node_group_grows_for_a_provisioning_request_applied_with_kubectl(tmp_path):
    """`--nodes 0 --node-group`: a cluster of the autoscaler's nodes only; a PodTemplate and a
    ProvisioningRequest applied with kubectl get their nodes, Ready a second after the scale-up."""
    kubeconfig = tmp_path / "kubeconfig"
    process = subprocess.Popen([sys.executable, "-m", "gangkeeper.cli", "sim", "serve", "--bare", "--tls",
                                "--nodes", "0", "--node-group", "pool:8:2:1", "--port", str(free_port()),
                                "--work-dir", str(tmp_path)],
                               stdout=subprocess.PIPE, stderr=(tmp_path / "sim.log").open("w"), text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert process.stdout.readline().endswith(": 0 nodes, 0 GPUs\n")
        assert process.stdout.readline() == ("  node group pool: 0 to 2 nodes of 8 GPUs, each Ready 1 s after its "
                                             "scale-up (emulated cluster-autoscaler)\n")
        manifests = tmp_path / "request.yaml"
        manifests.write_text(PROVISIONING)
        subprocess.run([str(KUBECTL), "--kubeconfig", str(kubeconfig), "apply", "-f", str(manifests)], check=True,
                       capture_output=True, timeout=30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            nodes = [n["metadata"]["name"] for n in kubectl(kubeconfig, "get", "nodes")["items"]]
            if nodes:
                break
            time.sleep(0.5)
        assert sorted(nodes) == ["pool-0", "pool-1"]
        [request] = kubectl(kubeconfig, "get", "provisioningrequests", "-n", "default")["items"]
        assert [(c["type"], c["status"]) for c in request["status"]["conditions"]] == [
            ("Accepted", "True"), ("Provisioned", "True")]
    finally:
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=15) == 0

