"""Pod preemption as the default kube-scheduler's DefaultPreemption does it: the pure choice of
victims and node (`sim.preemption`), then the emulated scheduler acting on it over the emulated
API server (victims marked and deleted, the preemptor nominated, nominations respected)."""

import pytest

from sim.cluster import Cluster
from sim.dra import REASON_CANNOT_ALLOCATE, REASON_NOT_AVAILABLE
from sim.interpod import REASON_AFFINITY as REASON_POD_AFFINITY
from sim.interpod import REASON_ANTI_AFFINITY, REASON_EXISTING_ANTI_AFFINITY
from sim.kubelet import Kubelet
from sim.placement import (
    REASON_AFFINITY,
    REASON_NOT_PINNED,
    REASON_PORTS,
    REASON_TAINTS,
    REASON_TOO_MANY_PODS,
    REASON_UNSCHEDULABLE,
    NodeFacts,
)
from sim.preemption import (
    Candidate,
    Preemptor,
    Resident,
    candidates_wanted,
    may_help,
    pick_candidate,
    post_filter,
    select_victims,
)
from sim.scheduler import Scheduler
from sim.spread import REASON_MISSING_LABEL, REASON_SKEW
from tests import builders

GPU = "nvidia.com/gpu"
SHORT = f"Insufficient {GPU}"
NS = "ml"
HOSTNAME = "kubernetes.io/hostname"


# --- the choice, as a pure function -------------------------------------------------------------

def running(name: str, priority: int, gpus: int, started: float = 0.0, **flags) -> tuple[Resident, int]:
    return Resident(name, priority, started, **flags), gpus


class Nodes:
    """Nodes of 8 GPUs and the pods on them; a pod fits where enough GPUs are left."""

    def __init__(self, capacity: int = 8, **pods_on: list[tuple[Resident, int]]):
        self.capacity = capacity
        self.pods_on = pods_on

    def residents(self, node: str, below: int) -> list[Resident]:
        return [pod for pod, _ in self.pods_on.get(node, []) if pod.priority < below]

    def fit(self, wanted: int):
        def fit(node: str, without: frozenset[str]) -> tuple[str, ...]:
            used = sum(gpus for pod, gpus in self.pods_on.get(node, []) if pod.key not in without)
            return () if used + wanted <= self.capacity else (SHORT,)
        return fit

    def victims_on(self, node: str, priority: int, wanted: int):
        return select_victims(priority, node, [pod for pod, _ in self.pods_on[node]], self.fit(wanted))

    def preempt(self, priority: int, wanted: int, *, policy: str = "PreemptLowerPriority", nominated=None,
                potential=None, node_count=None):
        potential = list(self.pods_on) if potential is None else potential
        return post_filter(Preemptor(priority, policy, nominated), potential, self.residents, self.fit(wanted),
                           len(self.pods_on) if node_count is None else node_count)


def names(victims) -> list[str]:
    return [v.key for v in victims]


def test_the_fewest_victims_are_taken_higher_priority_ones_reprieved_first():
    """The recorded preemption-minimal-victims: the 4-GPU pod of priority 10 goes, the two 2-GPU
    pods of priority 20 stay."""
    nodes = Nodes(pm=[running("low10-4gpu", 10, 4), running("low20-2gpu-a", 20, 2), running("low20-2gpu-b", 20, 2)])
    assert names(nodes.victims_on("pm", 1000, 4).victims) == ["low10-4gpu"]


def test_of_pods_of_one_priority_the_one_started_last_is_taken():
    nodes = Nodes(n=[running("late", 10, 4, started=200.0), running("early", 10, 4, started=100.0)])
    assert names(nodes.victims_on("n", 1000, 4).victims) == ["late"]


def test_pods_of_equal_or_higher_priority_are_never_victims():
    nodes = Nodes(n=[running("same", 500, 4), running("higher", 1000, 4)])
    assert nodes.victims_on("n", 500, 4) == ("No preemption victims found for incoming pod",)


def test_a_node_where_removing_every_lower_pod_is_not_enough_answers_with_the_filters_reasons():
    nodes = Nodes(n=[running("higher", 1000, 6), running("lower", 10, 2)])
    assert nodes.victims_on("n", 500, 4) == (SHORT,)


def candidate(node: str, *victims: tuple[int, float]) -> Candidate:
    """Victims as (priority, started), most important first."""
    return Candidate(node, tuple(Resident(f"{node}-{i}", p, s) for i, (p, s) in enumerate(victims)))


def test_the_node_whose_most_important_victim_matters_least_is_chosen_over_fewer_victims():
    assert pick_candidate([candidate("a", (50, 0)), candidate("b", (10, 0), (10, 0))]).node == "b"


def test_then_the_smallest_sum_of_priorities_where_every_victim_weighs_more_than_any_priority():
    """Upstream adds MaxInt32+1 to each priority: three victims of 10, 1, 1 weigh more than two of 10, 5."""
    assert pick_candidate([candidate("a", (10, 0), (1, 0), (1, 0)), candidate("b", (10, 0), (5, 0))]).node == "b"


def test_then_the_fewest_victims():
    """Equal sums with fewer victims take the extremes of int32: 1e9 + 2^31 either way."""
    lowest = -2 ** 31
    chosen = pick_candidate([candidate("a", (10 ** 9, 0), (lowest, 0)), candidate("b", (10 ** 9, 0))])
    assert chosen.node == "b"


def test_then_the_node_whose_most_important_victims_started_last():
    assert pick_candidate([candidate("a", (10, 100)), candidate("b", (10, 200))]).node == "b"


def test_the_start_that_counts_is_the_earliest_among_the_victims_of_the_highest_priority():
    chosen = pick_candidate([candidate("a", (10, 300), (5, 0)), candidate("b", (10, 200), (5, 500))])
    assert chosen.node == "a"


def test_of_nodes_equal_in_every_way_the_first_given_is_chosen():
    assert pick_candidate([candidate("a", (10, 0)), candidate("b", (10, 0))]).node == "a"


@pytest.mark.parametrize(("potential", "wanted"), [(5, 5), (500, 100), (2000, 200)])
def test_the_dry_run_looks_for_a_tenth_of_the_potential_nodes_and_at_least_a_hundred(potential, wanted):
    assert candidates_wanted(potential) == wanted


def test_the_dry_run_stops_once_it_has_enough_candidates():
    """150 potential nodes, each a candidate: only the first 100 are tried, so node 120's cheaper
    victim is never seen and node 50's is the best found."""
    pods_on = {f"n{i}": [running(f"v{i}", 100, 8)] for i in range(150)}
    pods_on["n50"] = [running("v50", 50, 8)]
    pods_on["n120"] = [running("v120", 1, 8)]
    verdict = Nodes(**pods_on).preempt(1000, 8)
    assert (verdict.nominate, names(verdict.victims)) == ("n50", ["v50"])


def test_a_pod_that_may_not_preempt_says_so_and_keeps_its_nomination():
    verdict = Nodes(n=[running("low", 10, 8)]).preempt(1000, 8, policy="Never", nominated="n")
    assert verdict.words == "preemption: not eligible due to preemptionPolicy=Never."
    assert verdict.keeps_nomination and not verdict.victims


def test_a_nominated_pod_waits_while_a_victim_on_its_node_terminates():
    nodes = Nodes(n=[running("going", 10, 4, deleting=True, preempted=True), running("low", 10, 4)])
    verdict = nodes.preempt(1000, 8, nominated="n")
    assert verdict.words == "preemption: not eligible due to a terminating pod on the nominated node."
    assert verdict.keeps_nomination and not verdict.victims


def test_a_pod_terminating_for_another_reason_does_not_hold_the_preemptor_back():
    nodes = Nodes(n=[running("deleted", 10, 4, deleting=True), running("low", 10, 4)])
    verdict = nodes.preempt(1000, 8, nominated="n")
    assert (verdict.nominate, names(verdict.victims)) == ("n", ["deleted", "low"])


def test_a_nominated_node_preemption_cannot_help_on_any_more_does_not_hold_the_preemptor_back():
    nodes = Nodes(n=[running("going", 10, 8, deleting=True, preempted=True)], m=[running("low", 10, 8)])
    verdict = nodes.preempt(1000, 8, nominated="n", potential=["m"])
    assert (verdict.nominate, names(verdict.victims)) == ("m", ["low"])


def test_with_no_candidate_the_words_count_every_node_and_the_nomination_is_cleared():
    nodes = Nodes(a=[running("higher", 2000, 8)], b=[running("big", 2000, 6), running("small", 10, 2)])
    verdict = nodes.preempt(1000, 4, nominated="b", node_count=3)
    assert verdict.words == ("preemption: 0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 1 No preemption "
                             "victims found for incoming pod, 1 Preemption is not helpful for scheduling.")
    assert (verdict.nominate, verdict.keeps_nomination) == (None, False)


def test_a_successful_preemption_says_nothing_and_nominates_the_node():
    verdict = Nodes(n=[running("low", 10, 8)]).preempt(1000, 8)
    assert (verdict.words, verdict.nominate, names(verdict.victims)) == ("", "n", ["low"])


NODE = NodeFacts("n", {}, (), False, {GPU: 8, "cpu": 64}, 110)


@pytest.mark.parametrize(("reasons", "helps"), [
    ((SHORT,), True), ((REASON_PORTS,), True), ((REASON_TOO_MANY_PODS,), True), ((REASON_SKEW,), True),
    ((REASON_ANTI_AFFINITY,), True), ((REASON_EXISTING_ANTI_AFFINITY,), True),
    ((REASON_UNSCHEDULABLE,), False), ((REASON_TAINTS,), False), ((REASON_AFFINITY,), False),
    ((REASON_NOT_PINNED,), False), ((REASON_POD_AFFINITY,), False), ((REASON_MISSING_LABEL,), False),
    ((REASON_CANNOT_ALLOCATE,), False), ((REASON_NOT_AVAILABLE,), False),
])
def test_preemption_tries_only_the_nodes_whose_rejection_removing_pods_can_change(reasons, helps):
    assert may_help(reasons, {GPU: 4}, NODE) is helps


def test_asking_more_of_a_resource_than_the_node_has_at_all_is_beyond_preemption():
    assert not may_help(("Insufficient cpu", SHORT), {GPU: 16, "cpu": 1}, NODE)


# --- the emulated scheduler preempting, over the emulated API server -------------------------------

def add_nodes(api, *names_: str, gpus: int = 8) -> None:
    for name in names_:
        api.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {HOSTNAME: name}},
                             "status": {"allocatable": {"cpu": "64", "memory": "512Gi", GPU: str(gpus), "pods": "110"},
                                        "conditions": [{"type": "Ready", "status": "True"}]}})


def scheduler(api, clock, *nodes: str, kubelet: bool = False) -> Cluster:
    add_nodes(api, *(nodes or ("node-0",)))
    return Cluster(api, clock, [Scheduler(api)] + ([Kubelet(api)] if kubelet else []))


def pod(name: str, priority: int, gpus: int, *, on: str | None = None, grace: int = 0, never: bool = False,
        labels=None, **spec) -> dict:
    """A pod of the given priority (its PriorityClass, `p<priority>`, `-never` when it may not
    preempt) asking GPUs, pinned to `on` the way gangkeeper pins (or free)."""
    container = builders.container("c", image="busybox:1.36", limits={GPU: str(gpus)})
    container.update(spec.pop("container", {}))
    if on:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [on]}]}]}}}
    return builders.pod(name, namespace=NS, labels=labels or {}, containers=[container],
                        priorityClassName=f"p{priority}" + ("-never" if never else ""),
                        terminationGracePeriodSeconds=grace, **spec)


def priority_class(api, name: str) -> None:
    """The PriorityClass `pod` names, made on first use."""
    if any(c["metadata"]["name"] == name for c in api.list("priorityclasses")):
        return
    never = name.endswith("-never")
    api.create("priorityclasses", {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                   "metadata": {"name": name}, "value": int(name[1:].removesuffix("-never")),
                                   "preemptionPolicy": "Never" if never else "PreemptLowerPriority"})


def create(api, cluster, *pods: dict) -> None:
    """Create the pods one at a time, letting the scheduler act after each."""
    for body in pods:
        priority_class(api, body["spec"]["priorityClassName"])
        api.create("pods", body, namespace=NS)
        cluster.settle()


def read(api, name: str) -> dict | None:
    found = [p for p in api.list("pods", namespace=NS) if p["metadata"]["name"] == name]
    return found[0] if found else None


def node_of(api, name: str) -> str | None:
    return read(api, name)["spec"].get("nodeName")


def nominated(api, name: str) -> str | None:
    return read(api, name)["status"].get("nominatedNodeName")


def refusal(api, name: str) -> str:
    return next(c["message"] for c in read(api, name)["status"]["conditions"] if c["type"] == "PodScheduled")


def state(api, name: str) -> str:
    found = read(api, name)
    return "deleted" if found is None else "terminating" if found["metadata"].get("deletionTimestamp") else "present"


def disruption(api, name: str) -> tuple | None:
    condition = next((c for c in read(api, name)["status"].get("conditions") or () if c["type"] == "DisruptionTarget"),
                     None)
    return condition and (condition["status"], condition["reason"], condition["message"])


PREEMPTED = ("True", "PreemptionByScheduler", "default-scheduler: preempting to accommodate a higher priority pod")


def full_node_then_high(api, cluster, grace: int = 30) -> None:
    """node-0 full with two 4-GPU pods of priority 10, then an 8-GPU pod of priority 1000 pinned there."""
    create(api, cluster, pod("low-0", 10, 4, on="node-0", grace=grace), pod("low-1", 10, 4, on="node-0", grace=grace),
           pod("high", 1000, 8, on="node-0"))


def test_victims_are_marked_and_deleted_gracefully_and_the_preemptor_waits_nominated(api, clock):
    cluster = scheduler(api, clock)
    full_node_then_high(api, cluster)
    assert [(state(api, n), disruption(api, n)) for n in ("low-0", "low-1")] == [("terminating", PREEMPTED)] * 2
    assert (node_of(api, "high"), nominated(api, "high")) == (None, "node-0")
    assert refusal(api, "high") == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


def test_the_preemptor_binds_once_the_kubelet_has_ended_its_victims(api, clock):
    cluster = scheduler(api, clock, kubelet=True)
    full_node_then_high(api, cluster)
    cluster.run_until(clock.now() + 5)
    assert (state(api, "low-0"), state(api, "low-1"), node_of(api, "high")) == ("deleted", "deleted", "node-0")


def test_a_preemptor_tried_again_waits_for_its_terminating_victims_and_preempts_nothing_more(api, clock):
    cluster = scheduler(api, clock)
    full_node_then_high(api, cluster)
    add_nodes(api, "node-1")  # a node event: every parked pod is tried again
    cluster.settle()
    assert refusal(api, "high") == (
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't satisfy plugin(s) [NodeAffinity]. "
        "no new claims to deallocate, preemption: not eligible due to a terminating pod on the nominated node.")
    assert nominated(api, "high") == "node-0"


def test_the_nomination_keeps_freed_room_from_pods_of_lower_priority(api, clock):
    cluster = scheduler(api, clock)
    full_node_then_high(api, cluster)
    api.delete("pods", "low-0", namespace=NS, grace_period_seconds=0)  # 4 GPUs free, low-1 still terminating
    create(api, cluster, pod("mid", 500, 4, on="node-0", never=True))
    assert node_of(api, "mid") is None
    assert refusal(api, "mid").startswith("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")


def test_a_pod_of_higher_priority_than_the_nominated_one_takes_the_freed_room(api, clock):
    cluster = scheduler(api, clock)
    full_node_then_high(api, cluster)
    api.delete("pods", "low-0", namespace=NS, grace_period_seconds=0)
    create(api, cluster, pod("top", 2000, 4, on="node-0", never=True))
    assert node_of(api, "top") == "node-0"


def test_a_nomination_that_preemption_cannot_keep_is_cleared(api, clock):
    cluster = scheduler(api, clock)
    full_node_then_high(api, cluster)
    for name in ("low-0", "low-1"):
        api.delete("pods", name, namespace=NS, grace_period_seconds=0)
    create(api, cluster, pod("top", 2000, 8, on="node-0"))  # goes first, by priority, and fills the node
    assert (node_of(api, "top"), node_of(api, "high"), nominated(api, "high")) == ("node-0", None, None)
    assert refusal(api, "high").endswith(
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")


def test_a_nominated_pod_takes_its_nominated_node_where_it_fits(api, clock):
    """Once both nodes are empty they score alike, and without its nomination the pod would take node-0."""
    cluster = scheduler(api, clock, "node-0", "node-1")
    create(api, cluster, pod("top", 2000, 8, on="node-0"), pod("low", 10, 8, on="node-1", grace=30),
           pod("high", 1000, 8))
    assert (nominated(api, "high"), state(api, "low")) == ("node-1", "terminating")
    for name in ("top", "low"):
        api.delete("pods", name, namespace=NS, grace_period_seconds=0)
    cluster.settle()
    assert node_of(api, "high") == "node-1"


def test_pods_of_lower_priority_nominated_to_the_node_lose_their_nomination(api, clock):
    cluster = scheduler(api, clock)
    create(api, cluster, pod("low-0", 10, 4, on="node-0", grace=30), pod("low-1", 10, 4, on="node-0", grace=30),
           pod("mid", 500, 4, on="node-0"))
    assert (nominated(api, "mid"), state(api, "low-0"), state(api, "low-1")) == ("node-0", "present", "terminating")
    create(api, cluster, pod("high", 1000, 8, on="node-0"))
    assert (nominated(api, "mid"), nominated(api, "high")) == (None, "node-0")
    assert (state(api, "low-0"), disruption(api, "low-0")) == ("terminating", PREEMPTED)


def test_a_victim_already_terminating_is_not_deleted_again(api, clock, monkeypatch):
    cluster = scheduler(api, clock)
    create(api, cluster, pod("low-0", 10, 4, on="node-0", grace=30), pod("low-1", 10, 4, on="node-0", grace=30),
           pod("mid", 500, 4, on="node-0"))
    deleted = []
    delete = api.delete
    monkeypatch.setattr(api, "delete", lambda resource, name, **options: (deleted.append(name),
                                                                          delete(resource, name, **options))[1])
    create(api, cluster, pod("high", 1000, 8, on="node-0"))
    assert deleted == ["low-0"]


def test_of_victims_of_one_priority_the_one_started_last_goes(api, clock):
    """Bound first, started last (the kubelet's startTime): bind order alone would take `second`."""
    cluster = scheduler(api, clock)
    create(api, cluster, pod("first", 10, 4, on="node-0"), pod("second", 10, 4, on="node-0"))
    for name, started in (("first", "2026-01-01T00:10:00Z"), ("second", "2026-01-01T00:05:00Z")):
        api.patch("pods", name, {"status": {"phase": "Running", "startTime": started}}, namespace=NS,
                  subresource="status")
    cluster.settle()
    create(api, cluster, pod("high", 1000, 4, on="node-0"))
    assert (state(api, "first"), state(api, "second"), node_of(api, "high")) == ("deleted", "present", "node-0")


def test_a_nominated_pod_does_not_take_the_refusal_of_a_pod_like_it_that_came_first(api, clock):
    """`twin` is `high` but for its name, gated until `high` has preempted: once both are tried,
    twin comes first (created first) and does not fit beside high's nomination; high does."""
    cluster = scheduler(api, clock)
    create(api, cluster, pod("low", 10, 8, on="node-0", grace=30),
           pod("twin", 1000, 8, on="node-0", schedulingGates=[{"name": "hold"}]))
    clock.advance(1)
    create(api, cluster, pod("high", 1000, 8, on="node-0"))
    assert nominated(api, "high") == "node-0"
    api.patch("pods", "twin", {"spec": {"schedulingGates": None}}, namespace=NS)
    api.delete("pods", "low", namespace=NS, grace_period_seconds=0)
    cluster.settle()
    assert (node_of(api, "high"), node_of(api, "twin")) == ("node-0", None)


def test_preemption_happens_on_the_node_whose_victims_matter_least(api, clock):
    cluster = scheduler(api, clock, "node-0", "node-1")
    create(api, cluster, pod("p100", 100, 8, on="node-0"), pod("p10", 10, 8, on="node-1"), pod("high", 1000, 8))
    assert (state(api, "p100"), state(api, "p10"), node_of(api, "high")) == ("present", "deleted", "node-1")


def test_the_dry_run_takes_away_a_victims_anti_affinity(api, clock):
    guard = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "high"}}, "topologyKey": HOSTNAME}]}}
    cluster = scheduler(api, clock)
    create(api, cluster, pod("guard", 10, 1, affinity=guard), pod("high", 1000, 1, on="node-0", labels={"app": "high"}))
    assert (state(api, "guard"), node_of(api, "high")) == ("deleted", "node-0")


def test_the_dry_run_frees_a_victims_host_port(api, clock):
    port = {"ports": [{"containerPort": 29500, "hostPort": 29500}]}
    cluster = scheduler(api, clock)
    create(api, cluster, pod("holder", 10, 1, on="node-0", container=port),
           pod("high", 1000, 1, on="node-0", container=port))
    assert (state(api, "holder"), node_of(api, "high")) == ("deleted", "node-0")


def test_a_pod_asking_more_than_its_node_has_preempts_nothing(api, clock):
    cluster = scheduler(api, clock)
    create(api, cluster, pod("low", 10, 8, on="node-0"), pod("huge", 1000, 16, on="node-0"))
    assert state(api, "low") == "present"
    assert refusal(api, "huge") == ("0/1 nodes are available: 1 Insufficient nvidia.com/gpu. no new claims to "
                                    "deallocate, preemption: 0/1 nodes are available: 1 Preemption is not helpful "
                                    "for scheduling.")


def test_pins_that_contradict_each_other_end_the_post_filter_phase_before_preemption(api, clock):
    """NodeAffinity's PreFilter refuses the pod before DynamicResources' PreFilter has run: the
    latter's PostFilter cannot read its state and that error ends the PostFilter phase."""
    torn = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-0"]},
                         {"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}]}}}
    cluster = scheduler(api, clock)
    create(api, cluster, pod("low", 10, 8, on="node-0"), pod("torn", 1000, 8, affinity=torn))
    assert state(api, "low") == "present"
    assert refusal(api, "torn") == "0/1 nodes are available: pod affinity terms conflict. not found"


def test_a_pod_refused_by_the_claims_prefilter_has_no_claims_to_deallocate(api, clock):
    """DynamicResources records a pod's claims only once its PreFilter accepts them."""
    cluster = scheduler(api, clock)
    api.create("resourceclaims", {"metadata": {"name": "odd"}, "spec": {"devices": {"requests": [
        {"name": "fpga", "exactly": {"deviceClassName": "fpga.example.com"}}]}}}, namespace=NS)
    create(api, cluster, pod("f", 1000, 0, resourceClaims=[{"name": "fpga", "resourceClaimName": "odd"}]))
    assert refusal(api, "f") == ("0/1 nodes are available: request fpga: device class fpga.example.com does not "
                                 "exist. no new claims to deallocate, preemption: 0/1 nodes are available: 1 "
                                 "Preemption is not helpful for scheduling.")
