"""The HTTP front end, through the official kubernetes client and kubectl."""

import json as jsonlib
import socket
import ssl
import subprocess
import threading
from http.client import HTTPConnection, HTTPSConnection
from pathlib import Path

import kubernetes
import pytest

from sim.api import ADMIN, User
from sim.apiserver import APIServer
from sim.faults import Faults
from sim.kubeconfig import write_kubeconfig
from sim.server import RunningServer
from tests.sim.helpers import http, namespace, node, pod, throwaway_certs

TOKENS = {"admin-token": ADMIN, "alice-token": User("alice")}
KUBECTL = Path(".venv/bin/kubectl")


@pytest.fixture()
def api():
    server = APIServer()
    server.create("namespaces", namespace("ml"))
    server.create("nodes", node("n1"))
    return server


@pytest.fixture()
def served(api):
    with RunningServer(api, tokens=TOKENS) as running:
        yield running


@pytest.fixture()
def core(served):
    config = kubernetes.client.Configuration()
    config.host = served.url
    config.api_key = {"authorization": "Bearer admin-token"}
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))


def status_of(call) -> int:
    with pytest.raises(kubernetes.client.ApiException) as error:
        call()
    return error.value.status


def test_list_with_selectors(api, core):
    api.create("pods", pod("a", labels={"app": "x"}), namespace="ml")
    api.create("pods", pod("b", labels={"app": "y"}), namespace="ml")
    assert [p.metadata.name for p in core.list_namespaced_pod("ml", label_selector="app in (x)").items] == ["a"]
    assert len(core.list_pod_for_all_namespaces(field_selector="metadata.name=b").items) == 1
    assert status_of(lambda: core.list_namespaced_pod("ml", label_selector="app in (")) == 400


def test_list_items_carry_their_type_only_for_custom_resources(api, served):
    api.create("pods", pod("a"), namespace="ml")
    api.create("gangs", {"apiVersion": "gangkeeper.io/v1alpha1", "kind": "Gang", "metadata": {"name": "g"},
                         "spec": {"minCount": 2}}, namespace="ml")
    auth = {"Authorization": "Bearer admin-token"}
    _, pods = http(served.url, "GET", "/api/v1/namespaces/ml/pods", headers=auth)
    _, gangs = http(served.url, "GET", "/apis/gangkeeper.io/v1alpha1/namespaces/ml/gangs", headers=auth)
    assert (pods["kind"], pods["apiVersion"]) == ("PodList", "v1")
    assert [set(item) & {"apiVersion", "kind"} for item in pods["items"]] == [set()]
    assert [(item["apiVersion"], item["kind"]) for item in gangs["items"]] == [("gangkeeper.io/v1alpha1", "Gang")]
    assert api.get("pods", "a", namespace="ml")["kind"] == "Pod"  # the stored object keeps its type


def test_list_pages_with_continue(api, core):
    for i in range(5):
        api.create("pods", pod(f"p{i}"), namespace="ml")
    first = core.list_namespaced_pod("ml", limit=2)
    rest = core.list_namespaced_pod("ml", limit=10, _continue=first.metadata._continue)
    assert [p.metadata.name for p in first.items + rest.items] == [f"p{i}" for i in range(5)]


def test_patch_binding_and_refusals(api, core):
    api.create("pods", pod("p", gates=["gangkeeper.io/gang"]), namespace="ml")
    assert status_of(lambda: core.patch_namespaced_pod("p", "ml", {"spec": {"nodeName": "n1"}})) == 422
    core.patch_namespaced_pod("p", "ml", [{"op": "remove", "path": "/spec/schedulingGates"}])
    binding = kubernetes.client.V1Binding(metadata=kubernetes.client.V1ObjectMeta(name="p"),
                                          target=kubernetes.client.V1ObjectReference(kind="Node", name="n1"))
    core.create_namespaced_binding("ml", binding, _preload_content=False)
    assert core.read_namespaced_pod("p", "ml").spec.node_name == "n1"
    assert status_of(lambda: core.create_namespaced_binding("ml", binding, _preload_content=False)) == 409
    assert status_of(lambda: core.create_namespaced_pod("ml", pod("p"))) == 409
    assert status_of(lambda: core.read_namespaced_pod("missing", "ml")) == 404


def test_watch_streams_changes_after_resource_version(api, core):
    rv = core.list_namespaced_pod("ml").metadata.resource_version
    api.create("pods", pod("w"), namespace="ml")
    api.patch("pods", "w", {"metadata": {"labels": {"x": "1"}}}, namespace="ml")
    events = kubernetes.watch.Watch().stream(core.list_namespaced_pod, "ml", resource_version=rv, timeout_seconds=1)
    assert [(e["type"], e["object"].metadata.name) for e in events] == [("ADDED", "w"), ("MODIFIED", "w")]


def test_watch_from_compacted_version_is_an_error_event():
    small = APIServer(history_size=5)
    for i in range(10):
        small.create("nodes", node(f"n{i}"))
    with RunningServer(small) as running:
        code, _ = http(running.url, "GET", "/api/v1/nodes")
        config = kubernetes.client.Configuration()
        config.host = running.url
        core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))
        with pytest.raises(kubernetes.client.ApiException) as error:
            list(kubernetes.watch.Watch().stream(core.list_node, resource_version="1", timeout_seconds=1))
    assert code == 200 and error.value.status == 410


def test_unknown_token_is_401(served):
    code, body = http(served.url, "GET", "/api/v1/pods", headers={"Authorization": "Bearer nope"})
    assert (code, body["reason"]) == (401, "Unauthorized")


def test_unknown_resource_is_the_real_404(served):
    code, body = http(served.url, "GET", "/apis/example.com/v1/widgets", headers={"Authorization": "Bearer admin-token"})
    assert (code, body["message"]) == (404, "the server could not find the requested resource")


def test_unsupported_patch_type_is_415(api, served):
    api.create("pods", pod("p"), namespace="ml")
    code, _ = http(served.url, "PATCH", "/api/v1/namespaces/ml/pods/p", {}, "text/plain",
                   {"Authorization": "Bearer admin-token"})
    assert code == 415


def test_discovery_lists_groups_and_subresources(served):
    auth = {"Authorization": "Bearer admin-token"}
    listed = {g["name"]: g for g in http(served.url, "GET", "/apis", headers=auth)[1]["groups"]}
    assert {"batch", "kubeflow.org", "gangkeeper.io", "scheduling.x-k8s.io", "policy"} <= set(listed)
    # PriorityClasses only: native PodGroups (v1beta1) are served only with their gate on
    assert [v["version"] for v in listed["scheduling.k8s.io"]["versions"]] == ["v1"]
    assert http(served.url, "GET", "/apis/scheduling.k8s.io/v1beta1", headers=auth)[0] == 404
    names = {r["name"] for r in http(served.url, "GET", "/api/v1", headers=auth)[1]["resources"]}
    assert {"pods", "pods/binding", "pods/status", "nodes/status", "namespaces", "events"} <= names


def test_injected_faults_answer_with_the_chosen_code(api):
    with RunningServer(api, faults=Faults(error_rate=1.0, error_code=429)) as running:
        assert http(running.url, "GET", "/api/v1/pods")[0] == 429


def test_kubectl_gets_nodes_and_pods_over_tls(api, tmp_path):
    certs = throwaway_certs(tmp_path)
    api.create("pods", pod("p"), namespace="ml")
    with RunningServer(api, tokens=TOKENS, certfile=str(certs["cert"]), keyfile=str(certs["key"])) as running:
        config = write_kubeconfig(tmp_path / "kubeconfig", running.url, "admin-token", str(certs["ca"]))
        result = subprocess.run([str(KUBECTL), "--kubeconfig", str(config), "get", "nodes,pods", "-A"],
                                capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert "node/n1" in result.stdout and "pod/p" in result.stdout


def test_a_refused_request_with_a_body_leaves_the_kept_alive_connection_usable(served):
    """A 404 answered before the body was read used to leave the body on the wire, so the next
    request on the same connection was parsed from the middle of it."""

    connection = HTTPConnection(served.url.removeprefix("http://"), timeout=5)
    headers = {"Authorization": "Bearer admin-token", "Content-Type": "application/json"}
    connection.request("POST", "/apis/nowhere.example.com/v1/namespaces/ml/things",
                       body=jsonlib.dumps({"metadata": {"name": "x" * 2000}}), headers=headers)
    refused = connection.getresponse()
    assert refused.status == 404 and refused.read()
    connection.request("GET", "/api/v1/namespaces/ml", headers=headers)
    answer = connection.getresponse()
    assert answer.status == 200 and jsonlib.loads(answer.read())["metadata"]["name"] == "ml"


def test_a_tls_client_that_leaves_a_watch_is_no_internal_error(api, tmp_path, caplog, capfd, monkeypatch):
    """`kubectl get -w` stopped with Ctrl-C drops its TLS connection without a goodbye: the next
    event the server writes fails with an SSL EOF, which is the client gone, not a fault to log."""
    certs = throwaway_certs(tmp_path)
    ended, stop_watch = threading.Event(), api.store.stop_watch
    monkeypatch.setattr(api.store, "stop_watch", lambda watcher: (stop_watch(watcher), ended.set()))
    with RunningServer(api, tokens=TOKENS, certfile=str(certs["cert"]), keyfile=str(certs["key"])) as running:
        context = ssl.create_default_context(cafile=str(certs["ca"]))
        host, port = running.url.removeprefix("https://").split(":")
        connection = HTTPSConnection(host, int(port), context=context, timeout=5)
        connection.request("GET", "/api/v1/namespaces/ml/pods?watch=true",
                           headers={"Authorization": "Bearer admin-token"})
        assert connection.getresponse().status == 200
        connection.sock.shutdown(socket.SHUT_RDWR)  # gone, without TLS's close_notify
        connection.sock.close()
        for name in ("after-1", "after-2", "after-3"):
            api.create("pods", pod(name), namespace="ml")
        assert ended.wait(10), "the server noticed the client had gone"
    assert "internal error" not in caplog.text
    assert "Traceback" not in capfd.readouterr().err
