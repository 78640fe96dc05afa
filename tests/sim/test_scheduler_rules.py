"""The emulated scheduler's pod affinity, spread, host ports and DRA, on the emulated API server, for
pods it places itself (and pods sharing a claim, pinned as gangkeeper pins them), and what its
grouping of parked pods by shape must tell apart."""

from collections import Counter

from sim.claims import ClaimController
from sim.cluster import Cluster
from sim.scheduler import Scheduler
from sim.spec import load, node_manifests
from tests import builders

NS = "ml"
ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def nodes(api, spec: str) -> None:
    for node in node_manifests(load(spec)):
        api.create("nodes", node)


def scheduler(api, clock) -> Cluster:
    return Cluster(api, clock, [Scheduler(api), ClaimController(api)])


def pod(name, labels=None, gpus=1, **spec):
    container = builders.container("c", image="busybox:1.36", limits={builders.GPU: str(gpus)})
    container.update(spec.pop("container", {}))
    return builders.pod(name, namespace=NS, labels=labels or {}, containers=[container], **spec)


def anti(key, labels):
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": key}]}}


def placement(api, *names):
    return {n: api.get("pods", n, namespace=NS)["spec"].get("nodeName") for n in names}


def refusal(api, name):
    return next(c["message"] for c in api.get("pods", name, namespace=NS)["status"]["conditions"]
                if c["type"] == "PodScheduled")


def test_anti_affinity_members_land_on_distinct_nodes(api, clock):
    nodes(api, "nodes: [{count: 3, gpusPerNode: 8}]")
    cluster = scheduler(api, clock)
    for i in range(4):
        api.create("pods", pod(f"w{i}", {"app": "w"}, gpus=4, affinity=anti(HOST, {"app": "w"})), namespace=NS)
    cluster.settle()
    where = placement(api, "w0", "w1", "w2", "w3")
    assert len({where[n] for n in ("w0", "w1", "w2")}) == 3 and where["w3"] is None
    assert refusal(api, "w3") == ("0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. no new claims to deallocate, "
        "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.")


def test_pods_alike_but_for_labels_are_told_apart_once_a_placed_pod_has_anti_affinity(api, clock):
    """Before the guard lands, x and y are one shape; after, only y may share its node."""
    nodes(api, "nodes: [{count: 1, gpusPerNode: 8}]")
    cluster = scheduler(api, clock)
    api.create("pods", pod("filler", gpus=8), namespace=NS)
    cluster.settle()
    api.create("pods", pod("x", {"app": "x"}), namespace=NS)
    api.create("pods", pod("y", {"app": "y"}), namespace=NS)
    cluster.settle()
    api.create("pods", pod("guard", gpus=0, nodeName="node-0", affinity=anti(HOST, {"app": "x"})), namespace=NS)
    api.delete("pods", "filler", namespace=NS, grace_period_seconds=0)
    cluster.settle()
    assert placement(api, "x", "y") == {"x": None, "y": "node-0"}
    assert refusal(api, "x") == ("0/1 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules. no new claims "
        "to deallocate, preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")


def test_a_pod_waiting_for_its_affinity_target_binds_when_the_target_does(api, clock):
    nodes(api, "nodes: [{count: 2, gpusPerNode: 8}]")
    cluster = scheduler(api, clock)
    follow = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "ps"}}, "topologyKey": HOST}]}}
    api.create("pods", pod("worker", affinity=follow), namespace=NS)
    cluster.settle()
    assert refusal(api, "worker") == ("0/2 nodes are available: 2 node(s) didn't match pod affinity rules. no new claims to deallocate, "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
    api.create("pods", pod("ps", {"app": "ps"}), namespace=NS)
    cluster.settle()
    where = placement(api, "ps", "worker")
    assert where["worker"] == where["ps"] is not None


def test_do_not_schedule_spread_keeps_zones_within_the_skew(api, clock):
    nodes(api, """nodes: [{count: 2, gpusPerNode: 8, namePrefix: a, labels: {topology.kubernetes.io/zone: a}},
                          {count: 1, gpusPerNode: 8, namePrefix: b, labels: {topology.kubernetes.io/zone: b}}]""")
    cluster = scheduler(api, clock)
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
               "labelSelector": {"matchLabels": {"app": "t"}}}]
    for i in range(6):
        api.create("pods", pod(f"t{i}", {"app": "t"}, topologySpreadConstraints=spread), namespace=NS)
        cluster.settle()
    zones = Counter(node[0] for node in placement(api, *(f"t{i}" for i in range(6))).values())
    assert zones == {"a": 3, "b": 3}


def test_schedule_anyway_spread_prefers_the_emptier_zone(api, clock):
    nodes(api, """nodes: [{count: 1, gpusPerNode: 8, namePrefix: a, labels: {topology.kubernetes.io/zone: a}},
                          {count: 1, gpusPerNode: 8, namePrefix: b, labels: {topology.kubernetes.io/zone: b}}]""")
    cluster = scheduler(api, clock)
    spread = [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
               "labelSelector": {"matchLabels": {"app": "t"}}}]
    api.create("pods", pod("other", {"app": "t"}, gpus=0, nodeName="a-0"), namespace=NS)
    api.create("pods", pod("soft", {"app": "t"}, topologySpreadConstraints=spread), namespace=NS)
    api.create("pods", pod("plain", {"app": "t"}), namespace=NS)
    cluster.settle()
    assert placement(api, "soft", "plain") == {"soft": "b-0", "plain": "a-0"}, "plain: the tie goes to the first node"


def test_host_port_pods_land_on_distinct_nodes(api, clock):
    nodes(api, "nodes: [{count: 2, gpusPerNode: 8}]")
    cluster = scheduler(api, clock)
    port = {"ports": [{"containerPort": 29500, "hostPort": 29500}]}
    for name in ("a", "b", "c"):
        api.create("pods", pod(name, container=port), namespace=NS)
    api.create("pods", pod("udp", container={"ports": [{"containerPort": 29500, "hostPort": 29500,
                                                        "protocol": "UDP"}]}), namespace=NS)
    cluster.settle()
    where = placement(api, "a", "b", "c", "udp")
    assert {where["a"], where["b"]} == {"node-0", "node-1"} and where["c"] is None and where["udp"] == "node-0"
    assert refusal(api, "c") == ("0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports. no new claims "
        "to deallocate, preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod.")


DEVICE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.example.com"},
                "spec": {"extendedResourceName": "example.com/gpu",
                         "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}
TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "gpu"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 1}}]}}}}


def with_devices(api, count=2, per_node=2):
    nodes(api, f"nodes: [{{count: {count}, gpusPerNode: 0}}]")
    api.create("deviceclasses", DEVICE_CLASS)
    api.create("resourceclaimtemplates", TEMPLATE, namespace=NS)
    for i in range(count):
        api.create("resourceslices", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"node-{i}-gpus"},
            "spec": {"driver": "gpu.example.com", "nodeName": f"node-{i}",
                     "pool": {"name": f"node-{i}", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{d}"} for d in range(per_node)]}})


def claimed(name, **spec):
    return pod(name, gpus=0, resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "gpu"}],
               container={"resources": {"claims": [{"name": "gpu"}]}}, **spec)


def test_claims_are_allocated_on_the_node_each_pod_is_bound_to(api, clock):
    with_devices(api)
    cluster = scheduler(api, clock)
    for i in range(5):
        api.create("pods", claimed(f"p{i}"), namespace=NS)
    cluster.settle()
    where = placement(api, *(f"p{i}" for i in range(5)))
    assert Counter(where.values()) == {"node-0": 2, "node-1": 2, None: 1}
    [waiting] = [n for n, node in where.items() if node is None]
    assert refusal(api, waiting) == ("0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, preemption: "
        "0/2 nodes are available: 2 Preemption is not helpful for scheduling.")
    devices = set()
    for claim in api.list("resourceclaims", namespace=NS):
        [owner] = claim["metadata"]["ownerReferences"]
        allocation = claim["status"].get("allocation")
        if owner["name"] == waiting:
            assert allocation is None
            continue
        [result] = allocation["devices"]["results"]
        assert result["pool"] == where[owner["name"]]
        assert allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [where[owner["name"]]]
        devices.add((result["pool"], result["device"]))
    assert len(devices) == 4


def test_extended_resources_are_served_from_devices_where_the_node_does_not_list_them(api, clock):
    with_devices(api, count=1, per_node=2)
    nodes(api, "nodes: [{count: 1, gpusPerNode: 1, gpuResource: example.com/gpu, namePrefix: plugin}]")
    cluster = scheduler(api, clock)
    for i in range(4):
        api.create("pods", pod(f"e{i}", gpus=0, container={"resources": {"limits": {"example.com/gpu": "1"}}}),
                   namespace=NS)
    cluster.settle()
    where = placement(api, *(f"e{i}" for i in range(4)))
    assert Counter(where.values()) == {"node-0": 2, "plugin-0": 1, None: 1}
    special = {c["metadata"]["ownerReferences"][0]["name"] for c in api.list("resourceclaims", namespace=NS)}
    assert special == {n for n, node in where.items() if node == "node-0"}, "no claim where the device plugin serves"


def test_a_shared_claim_brings_its_pods_to_the_node_of_its_device(api, clock):
    with_devices(api)
    cluster = scheduler(api, clock)
    api.create("resourceclaims", {"metadata": {"name": "shared"}, "spec": TEMPLATE["spec"]["spec"]}, namespace=NS)
    for name in ("s0", "s1", "s2"):
        api.create("pods", pod(name, gpus=0, resourceClaims=[{"name": "gpu", "resourceClaimName": "shared"}]),
                   namespace=NS)
    cluster.settle()
    assert len(set(placement(api, "s0", "s1", "s2").values())) == 1
    reserved = api.get("resourceclaims", "shared", namespace=NS)["status"]["reservedFor"]
    assert [r["name"] for r in reserved] == ["s0", "s1", "s2"]


def pinned(name, node, claim):
    """A pod naming the shared `claim`, pinned to `node` as gangkeeper pins a released member."""
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return pod(name, gpus=0, resourceClaims=[{"name": "gpu", "resourceClaimName": claim}],
               affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}})


def test_a_shared_claim_on_a_device_a_rack_reaches_is_allocated_once_and_its_pods_bind_across_the_rack(api, clock):
    nodes(api, """
nodes:
  - {count: 2, gpusPerNode: 0, labels: {rack: r1}}
  - {count: 1, gpusPerNode: 0, labels: {rack: r2}}
""")
    api.create("deviceclasses", DEVICE_CLASS)
    rack = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}
    api.create("resourceslices", {"metadata": {"name": "r1-links"}, "spec": {
        "driver": "gpu.example.com", "nodeSelector": rack, "pool": {"name": "r1", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "link-0"}]}})
    api.create("resourceclaims", {"metadata": {"name": "link"}, "spec": TEMPLATE["spec"]["spec"]}, namespace=NS)
    cluster = scheduler(api, clock)
    for name, node in (("a", "node-1"), ("b", "node-0"), ("c", "node-2")):
        api.create("pods", pinned(name, node, "link"), namespace=NS)
        cluster.settle()
    assert placement(api, "a", "b", "c") == {"a": "node-1", "b": "node-0", "c": None}
    assert refusal(api, "c") == ("0/3 nodes are available: 1 resourceclaim not available on the node, 2 node(s) "
                                 "didn't satisfy plugin(s) [NodeAffinity]. still not schedulable, preemption: 0/3 nodes "
                                 "are available: 3 Preemption is not helpful for scheduling.")
    status = api.get("resourceclaims", "link", namespace=NS)["status"]
    assert [r["device"] for r in status["allocation"]["devices"]["results"]] == ["link-0"]
    assert status["allocation"]["nodeSelector"] == rack
    assert [r["name"] for r in status["reservedFor"]] == ["a", "b"]


def test_a_request_for_a_class_that_does_not_exist_is_refused_on_every_node(api, clock):
    with_devices(api)
    cluster = scheduler(api, clock)
    api.create("resourceclaims", {"metadata": {"name": "odd"}, "spec": {"devices": {"requests": [
        {"name": "fpga", "exactly": {"deviceClassName": "fpga.example.com"}}]}}}, namespace=NS)
    api.create("pods", pod("f", gpus=0, resourceClaims=[{"name": "fpga", "resourceClaimName": "odd"}]), namespace=NS)
    cluster.settle()
    assert refusal(api, "f") == ("0/2 nodes are available: request fpga: device class fpga.example.com does not exist. no new "
        "claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.")


def test_a_pod_whose_claim_does_not_exist_waits_without_a_condition(api, clock):
    with_devices(api)
    cluster = scheduler(api, clock)
    api.create("pods", pod("f", gpus=0, resourceClaims=[{"name": "gpu", "resourceClaimName": "later"}]), namespace=NS)
    cluster.settle()
    assert "conditions" not in api.get("pods", "f", namespace=NS)["status"]
    api.create("resourceclaims", {"metadata": {"name": "later"}, "spec": TEMPLATE["spec"]["spec"]}, namespace=NS)
    cluster.settle()
    assert placement(api, "f")["f"] is not None


def test_pins_that_contradict_each_other_are_refused_before_any_node_is_tried(api, clock):
    nodes(api, "nodes: [{count: 2, gpusPerNode: 8}]")
    cluster = scheduler(api, clock)
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-0"]},
                            {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
    api.create("pods", pod("torn", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}), namespace=NS)
    cluster.settle()
    assert refusal(api, "torn") == "0/2 nodes are available: pod affinity terms conflict. not found"
