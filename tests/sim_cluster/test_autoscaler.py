"""The emulated cluster-autoscaler (`sim.autoscaler`) on the virtual clock, as cluster-autoscaler
behaves: node groups grow for ProvisioningRequests (all nodes or none, within the max) and for
pending pods (not gated ones, not those nodes in flight will hold), bookings expire or are consumed,
and empty nodes go after the scale-down delay, never below the group's min. Times are seconds
after the cluster starts; a node group's nodes are Ready 120 s after the scale-up that asked for them.
"""

import pytest

from sim.api import APIError
from sim.apiserver import APIServer
from sim.autoscaler import AutoscalerSettings
from sim.clock import VirtualClock, epoch
from sim.cluster import emulated_cluster
from sim.names import DURATION_ANNOTATION, NODE_GROUP_LABEL
from sim.placement import is_ready
from sim.spec import load

NS = "ml"
ATOMIC = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
CONSUME = "autoscaling.x-k8s.io/consume-provisioning-request"
POOL = """
nodes: []
nodeGroups: [{name: pool, max: 8, gpusPerNode: 8, provisioningSeconds: 120}]
"""
ACCEPTED = ("Accepted", "True", "Accepted", "ProvisioningRequest is accepted by ClusterAutoscaler")
PROVISIONED = ("Provisioned", "True", "CapacityIsProvisioned", "Capacity is found in the cluster")
FOUND = ("Provisioned", "True", "CapacityIsFound", "Capacity is found in the cluster")
NOT_FOUND = ("Provisioned", "False", "CapacityIsNotFound", "Capacity is not found, CA will try to find it later.")
RESERVATION_EXPIRED = ("BookingExpired", "True", "CapacityReservationTimeExpired",
                       "Capacity reservation time is expired")
CONSUMED = ("BookingExpired", "True", "CapacityBookingConsumed", "Capacity booking consumed: all pods scheduled")


class Emulation:
    """An emulated API server and cluster from a spec, in namespace `ml`; every change of a
    ProvisioningRequest's conditions is recorded with its time."""

    def __init__(self, spec: str = POOL, settings: AutoscalerSettings = AutoscalerSettings()):
        self.clock = VirtualClock()
        self.start = self.clock.now()
        self.api = APIServer(clock=self.clock.now)
        self.api.create("namespaces", {"metadata": {"name": NS}})
        self.history: list[tuple[float, str, list[dict]]] = []  # (when, request, its conditions) on every change
        self.api.subscribe(self._record)
        self.cluster = emulated_cluster(self.api, self.clock, spec=load(spec), autoscaling=settings)

    def _record(self, event) -> None:
        if event.resource == "provisioningrequests" and event.type == "MODIFIED":
            self.history.append((self.clock.now() - self.start, event.object["metadata"]["name"],
                                 event.object["status"]["conditions"]))

    def at(self, seconds: float) -> None:
        self.cluster.run_until(self.start + seconds)

    def template(self, name: str, gpus: int = 8) -> None:
        self.api.create("podtemplates", {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name},
                                         "template": {"spec": pod_spec(gpus)}}, namespace=NS)

    def request(self, name: str, template: str, count: int, provisioning_class: str = ATOMIC,
                parameters: dict | None = None) -> None:
        spec = {"provisioningClassName": provisioning_class,
                "podSets": [{"podTemplateRef": {"name": template}, "count": count}]}
        if parameters:
            spec["parameters"] = parameters
        self.api.create("provisioningrequests", {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
                                                 "metadata": {"name": name}, "spec": spec}, namespace=NS)

    def pod(self, name: str, gpus: int = 8, *, gated: bool = False, consumes: str = "", seconds: int = 0,
            priority_class: str = "") -> None:
        annotations = {CONSUME: consumes} if consumes else {}
        if seconds:
            annotations[DURATION_ANNOTATION] = str(seconds)
        spec = pod_spec(gpus)
        if priority_class:
            spec["priorityClassName"] = priority_class
        if gated:
            spec["schedulingGates"] = [{"name": "example.com/hold"}]
        self.api.create("pods", {"apiVersion": "v1", "kind": "Pod",
                                 "metadata": {"name": name, "annotations": annotations}, "spec": spec}, namespace=NS)

    def nodes(self) -> list[str]:
        """The node group's nodes, each Ready and labelled with its group."""
        nodes = [n for n in self.api.list("nodes") if NODE_GROUP_LABEL in n["metadata"]["labels"]]
        assert all(is_ready(n) and n["metadata"]["labels"][NODE_GROUP_LABEL] == "pool" for n in nodes)
        return sorted(n["metadata"]["name"] for n in nodes)

    def conditions(self, name: str) -> list[tuple[str, str, str, str]]:
        request = self.api.get("provisioningrequests", name, namespace=NS)
        return [(c["type"], c["status"], c["reason"], c["message"]) for c in request["status"]["conditions"]]

    def changes(self, name: str) -> list[tuple[float, tuple[str, ...]]]:
        """When the request's conditions changed, and the types it then had."""
        return [(when, tuple(c["type"] for c in conditions)) for when, request, conditions in self.history
                if request == name]

    def transitions(self, name: str, kind: str) -> list[float]:
        """Every transition time the request's `kind` condition had."""
        return sorted({epoch(c["lastTransitionTime"]) - self.start for _, request, conditions in self.history
                       if request == name for c in conditions if c["type"] == kind})

    def phases(self) -> dict[str, tuple[str, str]]:
        return {p["metadata"]["name"]: (p["status"]["phase"], p["spec"].get("nodeName", ""))
                for p in self.api.list("pods", namespace=NS)}


def pod_spec(gpus: int) -> dict:
    return {"containers": [{"name": "main", "image": "busybox:1.36",
                            "resources": {"limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}}}]}


# --- ProvisioningRequests ---------------------------------------------------------------------

def test_a_request_for_four_8_gpu_pods_gets_four_nodes_after_the_delay_accepted_then_provisioned():
    emulation = Emulation()
    emulation.template("worker")
    emulation.request("job", "worker", 4)
    emulation.at(119)
    assert emulation.changes("job") == [(0, ("Accepted",)), (0, ("Accepted", "Provisioned"))], \
        "Provisioned when the nodes are asked for, before they exist"
    assert emulation.conditions("job") == [ACCEPTED, PROVISIONED]
    assert emulation.nodes() == []
    emulation.at(120)
    assert emulation.nodes() == ["pool-0", "pool-1", "pool-2", "pool-3"]


def test_a_request_beyond_the_groups_max_scales_nothing_and_is_retried_with_backoff_until_it_expires():
    """cluster-autoscaler does not fail it: Provisioned=False, picked again after 1, 2, 4, 8 then
    10 minutes; only once it is older than the request expiry (7 days by default) is it Failed."""
    emulation = Emulation(settings=AutoscalerSettings(request_expiry_seconds=3000))
    emulation.template("worker")
    emulation.request("too-large", "worker", 9)
    emulation.at(2999)
    assert emulation.conditions("too-large") == [ACCEPTED, NOT_FOUND]
    assert emulation.transitions("too-large", "Provisioned") == [0, 60, 180, 420, 900, 1500, 2100, 2700]
    emulation.at(3000)
    assert emulation.conditions("too-large") == [ACCEPTED, NOT_FOUND,
                                                 ("Failed", "True", "Expired", "ProvisioningRequest is expired")]
    emulation.at(4000)
    assert emulation.transitions("too-large", "Provisioned")[-1] == 2700, "never picked again"
    assert emulation.nodes() == []


def test_an_unconsumed_booking_expires_after_ten_minutes_and_its_empty_nodes_go_ten_minutes_later():
    emulation = Emulation()
    emulation.template("worker")
    emulation.request("job", "worker", 4)
    emulation.at(599)
    assert emulation.conditions("job") == [ACCEPTED, PROVISIONED]
    emulation.at(600)
    assert emulation.conditions("job") == [ACCEPTED, PROVISIONED, RESERVATION_EXPIRED]
    emulation.at(1199)
    assert emulation.nodes() == ["pool-0", "pool-1", "pool-2", "pool-3"], "booked until 600, empty since"
    emulation.at(1200)
    assert emulation.nodes() == []


def test_a_booking_is_consumed_once_its_pods_fit_the_nodes_in_flight_and_the_nodes_stay_for_them():
    """cluster-autoscaler counts the consuming pods its simulation places as well as those bound:
    pods pending while the nodes are in flight consume the booking before the nodes exist."""
    emulation = Emulation()
    emulation.template("worker")
    emulation.request("job", "worker", 2)
    emulation.at(10)
    for index in range(2):
        emulation.pod(f"worker-{index}", consumes="job")
    emulation.at(119)
    assert {phase for phase, _ in emulation.phases().values()} == {"Pending"}
    assert emulation.conditions("job") == [ACCEPTED, PROVISIONED, CONSUMED]
    assert emulation.transitions("job", "BookingExpired") == [20], "the scan after they were found unschedulable"
    assert emulation.nodes() == []
    emulation.at(2000)
    assert emulation.phases() == {"worker-0": ("Running", "pool-0"), "worker-1": ("Running", "pool-1")}
    assert emulation.nodes() == ["pool-0", "pool-1"], "the pending consumers asked for no nodes of their own"


def test_a_request_whose_template_is_missing_fails_as_cluster_autoscaler_fails_it():
    emulation = Emulation()
    emulation.request("orphan", "absent", 2)
    emulation.at(10)
    assert emulation.conditions("orphan") == [
        ("Failed", "True", "FailedToCreatePods",
         "missing pod templates, 1 pod templates were referenced, 1 templates were missing: absent")]
    emulation.template("absent")
    emulation.at(1000)
    assert emulation.changes("orphan") == [(0, ("Failed",))], "Failed is final"
    assert emulation.nodes() == []


def test_check_capacity_answers_from_the_nodes_there_are_and_never_scales():
    emulation = Emulation("""
nodes: [{count: 1, gpusPerNode: 8, namePrefix: static}]
nodeGroups: [{name: pool, max: 8, gpusPerNode: 8, provisioningSeconds: 120}]
""")
    emulation.template("worker")
    emulation.request("fits", "worker", 1, CHECK_CAPACITY)
    emulation.at(5)
    emulation.request("booked-elsewhere", "worker", 1, CHECK_CAPACITY)
    emulation.at(15)
    emulation.request("no-retry", "worker", 1, CHECK_CAPACITY, {"noRetry": "true"})
    emulation.at(500)
    assert emulation.conditions("fits") == [ACCEPTED, FOUND]
    assert emulation.conditions("booked-elsewhere") == [ACCEPTED, NOT_FOUND], "the first booked the one node"
    assert emulation.conditions("no-retry") == [
        ACCEPTED, ("Failed", "True", "CapacityIsNotFound", "CA could not find requested capacity")]
    assert emulation.nodes() == []


def test_a_request_and_pending_pods_take_turns_scan_by_scan():
    """cluster-autoscaler's WrapperOrchestrator: with both waiting, each scan serves the other kind
    than the last; pods no group can hold still take their turn."""
    emulation = Emulation()
    emulation.pod("too-big", gpus=16)
    emulation.at(5)
    emulation.template("worker")
    emulation.request("job", "worker", 1)
    emulation.at(100)
    assert emulation.changes("job") == [(10, ("Accepted",)), (20, ("Accepted",)), (20, ("Accepted", "Provisioned"))]
    assert emulation.conditions("job")[1] == PROVISIONED


# --- pending pods -----------------------------------------------------------------------------

def test_pending_unschedulable_pods_get_nodes_and_gated_ones_do_not():
    """Pods asking for GPUs are helped once the oldest of them is 30 s old (cluster-autoscaler waits
    for more to come), so the nodes come at 30 + 120."""
    emulation = Emulation()
    for index in range(3):
        emulation.pod(f"free-{index}")
    for index in range(2):
        emulation.pod(f"gated-{index}", gated=True)
    emulation.at(149)
    assert emulation.nodes() == []
    emulation.at(150)
    assert emulation.nodes() == ["pool-0", "pool-1", "pool-2"]
    emulation.at(1000)
    assert emulation.nodes() == ["pool-0", "pool-1", "pool-2"]
    assert emulation.phases() == {"free-0": ("Running", "pool-0"), "free-1": ("Running", "pool-1"),
                                  "free-2": ("Running", "pool-2"), "gated-0": ("Pending", ""),
                                  "gated-1": ("Pending", "")}


def test_expendable_pods_below_the_priority_cutoff_get_no_node():
    """cluster-autoscaler's --expendable-pods-priority-cutoff (-10): a pending pod of a lower priority
    is expendable and adds no node; its FAQ's overprovisioning pause pods sit at -1, above it."""
    emulation = Emulation(POOL + "priorityClasses: [{name: expendable, value: -11}, {name: pause, value: -1}]\n")
    emulation.pod("expendable-0", priority_class="expendable")
    emulation.at(1000)
    assert emulation.nodes() == []
    emulation.pod("pause-0", priority_class="pause")
    emulation.at(2000)
    assert emulation.nodes() == ["pool-0"]


def test_pods_that_nodes_in_flight_will_hold_ask_for_no_more_nodes():
    emulation = Emulation()
    for index in range(3):
        emulation.pod(f"half-{index}", gpus=4)
    emulation.at(30)  # scaled up for them: 2 nodes in flight, Ready at 150
    emulation.pod("half-3", gpus=4)  # fits beside half-2 on the second node in flight
    emulation.at(60)
    emulation.pod("half-4", gpus=4)  # fits on none: a third node, asked for at 90
    emulation.at(149)
    assert emulation.nodes() == []
    emulation.at(150)
    assert emulation.nodes() == ["pool-0", "pool-1"]
    emulation.at(209)
    assert emulation.nodes() == ["pool-0", "pool-1"]
    emulation.at(210)
    assert emulation.nodes() == ["pool-0", "pool-1", "pool-2"]
    emulation.at(1000)
    assert emulation.nodes() == ["pool-0", "pool-1", "pool-2"]
    assert {phase for phase, _ in emulation.phases().values()} == {"Running"}


def test_empty_nodes_go_after_the_scale_down_delay_but_never_below_the_groups_min():
    emulation = Emulation("""
nodes: []
nodeGroups: [{name: pool, min: 1, max: 4, gpusPerNode: 8, provisioningSeconds: 120}]
""")
    assert emulation.nodes() == ["pool-0"], "a group starts with its min"
    for index in range(3):
        emulation.pod(f"short-{index}", seconds=300)
    emulation.at(900)
    assert emulation.phases() == {"short-0": ("Succeeded", "pool-0"), "short-1": ("Succeeded", "pool-1"),
                                  "short-2": ("Succeeded", "pool-2")}
    assert emulation.nodes() == ["pool-0", "pool-1", "pool-2"], "pool-0 empty since 302, the others since 452"
    emulation.at(1000)
    assert emulation.nodes() == ["pool-1", "pool-2"]
    emulation.at(1100)
    assert emulation.nodes() == ["pool-2"]
    emulation.at(10_000)
    assert emulation.nodes() == ["pool-2"]


# --- the API ----------------------------------------------------------------------------------

def test_the_api_refuses_a_bad_request_and_a_change_to_its_spec_with_the_crds_422():
    emulation = Emulation()
    bad = {"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest", "metadata": {"name": "bad"},
           "spec": {"podSets": [{"podTemplateRef": {"name": "worker"}, "count": 0}]}}
    with pytest.raises(APIError) as refused:
        emulation.api.create("provisioningrequests", bad, namespace=NS)
    status = refused.value.status
    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert status["message"] == (
        'ProvisioningRequest.autoscaling.x-k8s.io "bad" is invalid: [spec.podSets[0].count: Invalid value: 0: '
        'spec.podSets[0].count in body should be greater than or equal to 1, spec.provisioningClassName: '
        'Required value]')
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [
        ("spec.podSets[0].count", "FieldValueInvalid"), ("spec.provisioningClassName", "FieldValueRequired")]
    emulation.template("worker")
    emulation.request("job", "worker", 4)
    with pytest.raises(APIError) as refused:
        emulation.api.patch("provisioningrequests", "job", {"spec": {"podSets": [
            {"podTemplateRef": {"name": "worker"}, "count": 5}]}}, namespace=NS)
    assert refused.value.status["message"] == (
        'ProvisioningRequest.autoscaling.x-k8s.io "job" is invalid: spec.podSets: Invalid value: "array": '
        'Value is immutable')
