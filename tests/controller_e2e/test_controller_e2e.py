"""The real controller loop and `kubernetes` client over HTTP, against the emulated API server with the
real webhook admitting pods (no scheduler here: what is released stays unbound unless a test binds it)."""

import time

import pytest

from gangkeeper import names
from gangkeeper.controller.deciding.patches import release_patch
from gangkeeper.controller.deciding.settings import Settings
from gangkeeper.controller.reading.kube import METADATA_LIST, PODS, load
from gangkeeper.controller.reading.pods import pod_facts
from sim.api import CONTROLLER
from tests.controller_e2e.emulation import NS, Emulation, eventually, member, node, pinned_node, pytorchjob, released

pytestmark = pytest.mark.e2e


@pytest.fixture()
def emulation(tmp_path):
    emulation = Emulation(tmp_path)
    yield emulation
    emulation.close()


def test_complete_group_is_reserved_then_released_with_pins(emulation):
    for i in range(2):
        emulation.api.create("nodes", node(f"n{i}"))
    job, group = pytorchjob(emulation, "small", 1)
    first = member(emulation, job, 0)
    assert first["metadata"]["labels"][names.GROUP_LABEL] == group and not released(first)
    emulation.controller()
    time.sleep(0.5)
    assert not any(released(p) for p in emulation.pods().values()), "an incomplete group must stay gated"
    member(emulation, job, 1)
    eventually(lambda: all(released(p) for p in emulation.pods().values()))
    pods = emulation.pods()
    assert {pinned_node(p) for p in pods.values()} == {"n0", "n1"}
    reserved = emulation.reserved_nodes()
    for name, pod in pods.items():
        assert names.RESERVED_NODE_ANNOTATION not in pod["metadata"]["annotations"], "reserved on the Gang"
        assert reserved[name] == pinned_node(pod)
        assert pod["metadata"]["annotations"][names.RELEASED_AT_ANNOTATION].endswith("Z")
    gang = eventually(lambda: (emulation.api.list("gangs", namespace=NS) or [None])[0])
    assert gang["spec"]["minCount"] == 2
    eventually(lambda: {(e["involvedObject"]["kind"], e["involvedObject"]["name"])
                        for e in emulation.api.list("events", namespace=NS) if e["reason"] == "Released"}
               == {("Gang", gang["metadata"]["name"]), ("Pod", "small-0"), ("Pod", "small-1")})


def test_released_member_not_bound_rolls_the_group_back(emulation):
    emulation.api.create("nodes", node("n0"))
    job, _ = pytorchjob(emulation, "slow", 0)
    member(emulation, job, 0)
    _, audit = emulation.controller(Settings(bind_timeout_seconds=1.0))
    eventually(lambda: "gang.rolled_back" in audit.events())
    suspended = eventually(lambda: emulation.api.get("pytorchjobs", "slow", namespace=NS)["spec"].get("runPolicy"))
    assert suspended["suspend"] is True, "its owner is suspended (no operator here deletes its pods)"
    annotations = emulation.api.get("pytorchjobs", "slow", namespace=NS)["metadata"]["annotations"]
    assert annotations[names.SUSPENDED_BY_ANNOTATION] == names.SUSPENDED_BY_VALUE
    warnings = eventually(lambda: [e for e in emulation.api.list("events", namespace=NS)
                                   if e["reason"] == "RolledBack"])
    assert {e["type"] for e in warnings} == {"Warning"}


def reserve_as_the_crashed_leader(emulation, name, node_name, release=False):
    """What a leader that crashed mid-way had written: the reservation, and maybe the release."""
    emulation.api.patch("pods", name, {"metadata": {"annotations": {names.RESERVED_NODE_ANNOTATION: node_name}}},
                        namespace=NS, user=CONTROLLER)
    if release:
        pod = emulation.api.get("pods", name, namespace=NS)
        emulation.api.patch("pods", name, list(release_patch(pod_facts(pod), node_name, time.time())), namespace=NS,
                            patch_type="application/json-patch+json", user=CONTROLLER)


def test_restart_mid_release_rebuilds_the_ledger_and_releases_the_rest(emulation):
    emulation.api.create("nodes", node("n0"))
    emulation.api.create("nodes", node("n1"))
    job, _ = pytorchjob(emulation, "resume", 1)
    for index in range(2):
        member(emulation, job, index, gpus=4)
    reserve_as_the_crashed_leader(emulation, "resume-0", "n1", release=True)
    reserve_as_the_crashed_leader(emulation, "resume-1", "n1")
    other, _ = pytorchjob(emulation, "other", 0)
    member(emulation, other, 0, gpus=8)
    _, audit = emulation.controller()
    eventually(lambda: all(released(p) for p in emulation.pods().values()))
    pods = emulation.pods()
    assert pinned_node(pods["resume-0"]) == pinned_node(pods["resume-1"]) == "n1"
    assert pinned_node(pods["other-0"]) == "n0", "n1 was booked: the reservations survived the restart"
    assert audit.events().count("gang.reserved") == 1, "only the other job was reserved"


def test_namespace_scope_manages_one_namespace_but_counts_capacity_in_all(emulation):
    emulation.api.create("nodes", node("n0"))
    emulation.api.create("nodes", node("n1"))
    elsewhere = emulation.api.create("pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "busy"},
        "spec": {"nodeName": "n0", "containers": [{"name": "c", "image": "busybox",
                                                  "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}},
        namespace="other")
    assert elsewhere["spec"]["nodeName"] == "n0"
    job, _ = pytorchjob(emulation, "scoped", 0)
    member(emulation, job, 0)
    controller, _ = emulation.controller(namespace=NS)
    eventually(lambda: all(released(p) for p in emulation.pods().values()))
    assert pinned_node(emulation.pods()["scoped-0"]) == "n1"
    assert {key[0] for key in controller.memory.first_seen} == {NS}


def test_missing_crds_switch_their_integrations_off(tmp_path, caplog):
    emulation = Emulation(tmp_path, unserved={"pytorchjobs.kubeflow.org", "gangs.gangkeeper.io"})
    try:
        emulation.api.create("nodes", node("n0"))
        pod = emulation.api.create("pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lone"},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}, namespace=NS)
        assert not released(pod)
        controller, audit = emulation.controller()
        eventually(controller.synced)
        eventually(lambda: released(emulation.pods()["lone"]), what="a lone GPU pod released without Gangs")
        for resource in ("pytorchjobs.kubeflow.org", "gangs.gangkeeper.io"):
            said = [r for r in caplog.records if resource in r.getMessage() and "not served" in r.getMessage()]
            assert len(said) == 1
        eventually(lambda: "gang.released" in audit.events())
    finally:
        emulation.close()


def test_a_groups_members_are_checked_before_release_by_their_metadata_alone(emulation):
    job, group = pytorchjob(emulation, "check", 1)
    pods = [member(emulation, job, index) for index in range(2)]
    path, _ = emulation.kubeconfig()
    client = load(str(path))
    assert client.resource_versions(PODS, NS, f"{names.GROUP_LABEL}={group}") == {
        pod["metadata"]["name"]: pod["metadata"]["resourceVersion"] for pod in pods}
    listed = client._json("GET", PODS.path(NS), query=[("labelSelector", f"{names.GROUP_LABEL}={group}")],
                          accept=METADATA_LIST)
    assert listed["kind"] == "PartialObjectMetadataList"
    assert {tuple(sorted(item)) for item in listed["items"]} == {("apiVersion", "kind", "metadata")}
