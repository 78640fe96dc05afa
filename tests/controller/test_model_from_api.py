from fractions import Fraction

import pytest

from gangkeeper import names
from gangkeeper.controller.cache.groups import JOBS, PYTORCHJOBS
from gangkeeper.controller.model.members import group_of
from gangkeeper.controller.model.nodes import Taint, Toleration
from gangkeeper.controller.model.selectors import Requirement, Term
from gangkeeper.controller.reading.nodes import node_from_api
from gangkeeper.controller.reading.pods import member_from_api, pod_facts
from gangkeeper.controller.reading.workloads import workload_from_api
from tests.controller.builders import GPU, member, node_object, pod_object


def test_node_keeps_what_decisions_read():
    raw = node_object("n1", gpus=8, cpu="95500m", labels={"pool": "a100"}, unschedulable=True,
                      taints=[{"key": GPU, "value": "present", "effect": "NoSchedule"}])
    node = node_from_api(raw)
    assert node.name == "n1"
    assert node.allocatable == {"cpu": Fraction(191, 2), "memory": 2**40, "pods": 110, GPU: 8}
    assert node.labels == {"pool": "a100"}
    assert node.taints == (Taint(GPU, "present", "NoSchedule"),)
    assert node.unschedulable and node.ready


def test_requests_and_allocatable_are_counted_in_whole_millicores_and_units_as_the_scheduler_counts():
    """NodeResourcesFit rounds each pod's and each node's amounts up: cpu to a millicore, the rest to a unit."""
    tiny = member("p", gpus=0, cpu="0.4m", memory="1.5")
    assert tiny.requests == {"cpu": Fraction(1, 1000), "memory": 2}
    assert node_from_api(node_object("n1", cpu="1.5m", memory="0.5")).allocatable["cpu"] == Fraction(2, 1000)


def test_node_without_a_true_ready_condition_is_not_ready():
    assert not node_from_api(node_object("n1", ready=False)).ready
    assert not node_from_api({"metadata": {"name": "bare"}}).ready


def test_member_requests_count_sidecars_init_steps_and_overhead():
    sidecar = {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
    init = {"name": "fetch", "resources": {"requests": {"cpu": "10"}}}
    pod = member("p", gpus=8, cpu="4", init_containers=[sidecar, init], overhead={"cpu": "250m"})
    assert pod.requests == {"cpu": Fraction(45, 4), "memory": 64 * 2**30, GPU: 8}


def test_member_reads_gate_reservation_constraints_and_creation():
    pod = member("p", priority=100, node_selector={"pool": "a100"},
                 tolerations=[{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
                 affinity_terms=[{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]}],
                 reserved_node="n7")
    assert (pod.namespace, pod.name, pod.uid) == ("team", "p", "uid-team-p")
    assert pod.priority == 100 and pod.gated and pod.reserved_node == "n7" and not pod.waiting
    assert pod.node_selector == (("pool", "a100"),)
    assert pod.tolerations == (Toleration(GPU, "Exists", "", "NoSchedule"),)
    assert pod.affinity_terms == (Term((Requirement("zone", "In", ("a", "b")),), ()),)
    assert pod.created == 1735689600.0


def test_no_required_affinity_is_none_and_an_empty_one_is_not():
    assert member("p").affinity_terms is None
    assert member("p", affinity_terms=[]).affinity_terms == ()


def test_a_released_member_without_annotation_is_reserved_where_every_term_pins_it():
    pin = {"key": names.PIN_FIELD, "operator": "In", "values": ["n3"]}
    terms = [{"matchExpressions": [{"key": "a", "operator": "Exists"}], "matchFields": [pin]},
             {"matchFields": [pin]}]
    assert member("p", gated=False, affinity_terms=terms).reserved_node == "n3"
    assert member("p", gated=False, affinity_terms=terms + [{"matchExpressions": []}]).reserved_node is None


def test_bound_and_terminal_members():
    pod = member("p", gated=False, node_name="n1", phase="Succeeded")
    assert pod.node == "n1" and pod.terminal and not pod.waiting


def test_identical_members_share_requests_and_constraints():
    first, second = member("a"), member("b")
    assert first.requests is second.requests
    assert first.placement_key == second.placement_key


def test_group_is_complete_when_min_count_live_members_are_all_gated():
    members = [member(f"p{i}") for i in range(3)]
    assert group_of(("team", "g"), members, 3, 0.0).complete
    assert not group_of(("team", "g"), members[:2], 3, 0.0).complete
    finished = member_from_api(pod_object("p3", gated=False, phase="Failed"))
    assert group_of(("team", "g"), members + [finished], 3, 0.0).complete
    released = member("p4", gated=False)
    assert not group_of(("team", "g"), members + [released], 3, 0.0).complete


def test_group_priority_is_its_most_important_member():
    group = group_of(("team", "g"), [member("a", priority=5), member("b", priority=50)], 2, 0.0)
    assert group.priority == 50 and str(group) == "team/g"


def test_a_workload_listed_without_api_version_and_kind_gets_them_from_its_resource():
    listed_job = {"metadata": {"name": "train", "namespace": "ml", "uid": "u-1"}, "spec": {"parallelism": 2}}
    job = workload_from_api(JOBS, listed_job)
    assert (job.api_version, job.kind, job.name, job.uid) == ("batch/v1", "Job", "train", "u-1")
    pytorchjob = workload_from_api(PYTORCHJOBS, {"metadata": {"name": "pj"}, "spec": {}})
    assert (pytorchjob.api_version, pytorchjob.kind) == ("kubeflow.org/v1", "PyTorchJob")


def test_a_pod_with_a_deletion_timestamp_is_terminating():
    pod = pod_object("going", gated=False, node_name="n1", phase="Running")
    assert not member_from_api(pod).terminating
    pod["metadata"]["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    assert member_from_api(pod).terminating


def test_pods_that_write_their_requests_alike_share_them_and_others_read_their_own():
    first, second = member_from_api(pod_object("a", gpus=4)), member_from_api(pod_object("b", gpus=4))
    assert first.requests is second.requests
    by_limits = pod_object("c", gpus=4)
    resources = by_limits["spec"]["containers"][0]["resources"]
    resources["limits"], resources["requests"] = dict(resources["requests"]), {"cpu": "1"}
    assert member_from_api(by_limits).requests == {**first.requests, "cpu": 1}, "a request defaults to its limit"
    with_init = pod_object("d", gpus=4)
    with_init["spec"]["initContainers"] = [{"name": "side", "restartPolicy": "Always",
                                            "resources": {"requests": {"cpu": "500m"}}}]
    assert member_from_api(with_init).requests["cpu"] == first.requests["cpu"] + Fraction(1, 2)
    odd = pod_object("e", gpus=4)
    odd["spec"]["containers"][0]["resources"]["requests"]["example.com/x"] = ["not", "hashable"]
    with pytest.raises(ValueError, match="is a list"):  # read the long way, which says what is wrong
        member_from_api(odd)


def test_a_bound_pod_outside_every_group_is_read_for_its_node_its_neighbours_and_preemption_alone():
    pod = pod_object("web", gpus=1, gated=False, node_name="n1", phase="Running", priority=7,
                     tolerations=[{"key": "gpu", "operator": "Exists"}], node_selector={"pool": "a"})
    pod["metadata"].update(labels={"app": "web"}, ownerReferences=[{"kind": "ReplicaSet", "name": "web", "uid": "r",
                                                                     "controller": True}])
    pod["spec"].update(affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                           {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}]}},
                       resourceClaims=[{"name": "gpu", "resourceClaimName": "shared"}])
    facts, whole = pod_facts(pod), member_from_api(pod)
    read = ("namespace", "name", "uid", "requests", "priority", "preempts", "terminating", "node", "phase", "created",
            "labels", "rules", "claims")
    assert [getattr(facts.member, field) for field in read] == [getattr(whole, field) for field in read]
    assert facts.member.rules.anti_affinity and facts.group is None and facts.resource_version == ""
    assert (facts.member.tolerations, facts.member.node_selector, facts.owner) == ((), (), None), \
        "never placed again: its own constraints are not read"
    assert pod_facts(pod_object("waiting", gated=False)) is None, "not bound: it takes nothing"
    assert pod_facts(pod_object("done", gated=False, node_name="n1", phase="Succeeded")) is None
    placeholder = pod_object("hold", gated=False, node_name="n1", phase="Running",
                             tolerations=[{"key": "gpu", "operator": "Exists"}])
    placeholder["metadata"]["labels"] = {names.CAPACITY_FOR_LABEL: "gang-uid"}
    assert pod_facts(placeholder).member.tolerations == member_from_api(placeholder).tolerations != (), "read whole"
