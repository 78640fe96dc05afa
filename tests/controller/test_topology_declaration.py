"""Issue 13, the declaration side: what a member's annotations and a Gang's `spec.topology` say of
where a group must sit, the order its members are sliced in, and the problems a group gets when
the declarations disagree or cannot be followed."""

import pytest

from gangkeeper import names
from gangkeeper.controller.cache.groups import GANGS, build_groups
from gangkeeper.controller.model.members import NO_TOPOLOGY, UNRANKED, TopologyRule, rank_order
from gangkeeper.controller.reading.pods import member_from_api, pod_facts
from gangkeeper.controller.reading.workloads import workload_from_api
from tests import builders

ZONE, BLOCK, RACK, CLIQUE = ("topology.kubernetes.io/zone", "cloud.google.com/gce-topology-block", "rack",
                             "nvidia.com/gpu.clique")
REQUIRED, PREFERRED = names.TOPOLOGY_REQUIRED_ANNOTATION, names.TOPOLOGY_PREFERRED_ANNOTATION
SLICE_REQUIRED, SLICE_SIZE = names.TOPOLOGY_SLICE_REQUIRED_ANNOTATION, names.TOPOLOGY_SLICE_SIZE_ANNOTATION


# --- builders ----------------------------------------------------------------------------------

def pod(name, annotations=None, labels=None, phase="Pending"):
    """A gated pod of group `g` in namespace `ns`, with `annotations` and `labels` added."""
    return builders.pod(name, namespace="ns", uid=f"u-{name}", labels={names.GROUP_LABEL: "g", **(labels or {})},
                        annotations={names.GROUP_SOURCE_ANNOTATION: names.SOURCE_EXPLICIT, **(annotations or {})},
                        gates=(names.SCHEDULING_GATE,), containers=[builders.container("c", gpus=8)], phase=phase)


def members(count, size=None, **annotations_by_pod):
    """`count` pods p0… declaring a group of `size` (unless None); `p3={…}` adds annotations to p3,
    `every={…}` to all of them."""
    every = annotations_by_pod.pop("every", {})
    declared = {names.MIN_COUNT_ANNOTATION: str(size or count)} if size is not False else {}
    return [pod(f"p{i}", {**declared, **every, **annotations_by_pod.get(f"p{i}", {})}) for i in range(count)]


def gang(min_count, topology=None, name="g"):
    spec = {"minCount": min_count} | ({"topology": topology} if topology is not None else {})
    workload = workload_from_api(GANGS, {"metadata": {"name": name, "namespace": "ns", "uid": "gang-uid"},
                                         "spec": spec})
    return {(GANGS, "ns", name): workload}


def view_of(pods, workloads=None):
    (view,) = build_groups([pod_facts(p) for p in pods], workloads or {}, {}, 0.0)
    return view


# --- a member's own declaration ---------------------------------------------------------------

def test_a_member_reads_the_four_topology_annotations():
    member = member_from_api(pod("p", {REQUIRED: ZONE, PREFERRED: RACK, SLICE_REQUIRED: CLIQUE, SLICE_SIZE: "4"}))
    assert member.topology == TopologyRule(required=ZONE, preferred=RACK, slice_required=CLIQUE, slice_size=4)


def test_a_member_without_them_has_no_topology_and_members_declaring_the_same_share_one_rule():
    assert member_from_api(pod("p")).topology is NO_TOPOLOGY
    a, b = (member_from_api(pod(name, {REQUIRED: ZONE})) for name in ("a", "b"))
    assert a.topology is b.topology


@pytest.mark.parametrize("written", ["four", "-4", " 4", "4.0", "²"])
def test_an_unreadable_slice_size_is_kept_as_zero_for_the_group_to_report(written):
    assert member_from_api(pod("p", {SLICE_REQUIRED: CLIQUE, SLICE_SIZE: written})).topology.slice_size == 0


# --- rank: the order slices follow -------------------------------------------------------------

def ranked(pods):
    return [m.name for m in rank_order(member_from_api(p) for p in pods)]


def test_job_pods_rank_by_completion_index_not_by_name():
    pods = [pod(f"train-{index}-x{index}", labels={names.JOB_COMPLETION_INDEX: str(index)}) for index in (10, 2, 1)]
    assert ranked(pods) == ["train-1-x1", "train-2-x2", "train-10-x10"]


def test_a_completion_index_only_in_the_annotation_still_ranks():
    old_cluster = pod("b", {names.JOB_COMPLETION_INDEX: "0"})
    assert ranked([pod("a", labels={names.JOB_COMPLETION_INDEX: "1"}), old_cluster]) == ["b", "a"]


def test_pytorchjob_pods_rank_master_first_then_workers_by_replica_index():
    def replica(kind, index):
        return pod(f"bert-{kind}-{index}", labels={names.KUBEFLOW_REPLICA_TYPE_LABEL: kind,
                                                   names.KUBEFLOW_REPLICA_INDEX_LABEL: str(index)})
    pods = [replica("worker", 10), replica("worker", 2), replica("master", 0), replica("Worker", 0)]
    assert ranked(pods) == ["bert-master-0", "bert-Worker-0", "bert-worker-2", "bert-worker-10"]


def test_jobset_pods_rank_by_job_index_then_completion_index():
    def jobset_pod(job, completion, global_index=None):
        labels = {names.JOBSET_NAME_LABEL: "llm", names.JOBSET_REPLICATED_JOB_LABEL: "workers",
                  names.JOBSET_JOB_INDEX_LABEL: str(job), names.JOB_COMPLETION_INDEX: str(completion)}
        if global_index is not None:
            labels[names.JOBSET_JOB_GLOBAL_INDEX_LABEL] = str(global_index)
        return pod(f"llm-workers-{job}-{completion}", labels=labels)
    pods = [jobset_pod(1, 0), jobset_pod(0, 1), jobset_pod(10, 0), jobset_pod(0, 0)]
    assert ranked(pods) == ["llm-workers-0-0", "llm-workers-0-1", "llm-workers-1-0", "llm-workers-10-0"]


def test_a_jobset_global_index_orders_jobs_across_replicated_jobs():
    def jobset_pod(replicated, job, global_index):
        return pod(f"{replicated}-{job}", labels={
            names.JOBSET_NAME_LABEL: "llm", names.JOBSET_REPLICATED_JOB_LABEL: replicated,
            names.JOBSET_JOB_INDEX_LABEL: str(job), names.JOBSET_JOB_GLOBAL_INDEX_LABEL: str(global_index),
            names.JOB_COMPLETION_INDEX: "0"})
    pods = [jobset_pod("workers", 0, 1), jobset_pod("driver", 0, 0), jobset_pod("workers", 1, 2)]
    assert ranked(pods) == ["driver-0", "workers-0", "workers-1"]


def test_pods_without_an_index_rank_by_name_after_those_with_one():
    pods = [pod("b"), pod("z", labels={names.JOB_COMPLETION_INDEX: "7"}), pod("a"),
            pod("c", labels={names.JOB_COMPLETION_INDEX: "not-a-number"})]
    assert ranked(pods) == ["z", "a", "b", "c"]


def test_ranks_are_shared_and_a_pod_without_an_index_holds_the_one_unranked():
    first, second = (member_from_api(pod(name, labels={names.JOB_COMPLETION_INDEX: "3"})) for name in ("a", "b"))
    assert first.rank is second.rank
    assert member_from_api(pod("plain")).rank is UNRANKED


def test_ranks_of_any_two_pods_compare():
    kinds = [pod("plain"), pod("job", labels={names.JOB_COMPLETION_INDEX: "1"}),
             pod("torch", labels={names.KUBEFLOW_REPLICA_TYPE_LABEL: "master", names.KUBEFLOW_REPLICA_INDEX_LABEL: "0"}),
             pod("set", labels={names.JOBSET_NAME_LABEL: "s", names.JOBSET_JOB_INDEX_LABEL: "0"})]
    assert ranked(kinds) == ["set", "torch", "job", "plain"]  # equal ranks by name, the unindexed last


# --- the group's rule -------------------------------------------------------------------------

def test_members_that_declare_the_same_give_the_group_its_rule():
    view = view_of(members(4, every={REQUIRED: ZONE, PREFERRED: RACK}))
    assert view.problem is None and view.group.min_count == 4
    assert view.group.topology == TopologyRule(required=ZONE, preferred=RACK)


def test_a_group_nobody_declares_a_topology_for_has_none():
    view = view_of(members(2))
    assert view.problem is None and view.group.topology is NO_TOPOLOGY


def test_a_member_that_declares_nothing_leaves_the_rule_to_the_others():
    # A PyTorchJob whose Worker template carries the annotation and whose Master's does not.
    view = view_of(members(3, p1={REQUIRED: ZONE}, p2={REQUIRED: ZONE}))
    assert view.problem is None and view.group.topology == TopologyRule(required=ZONE)


def test_members_that_disagree_are_a_declaration_problem_naming_them_and_their_values():
    view = view_of(members(2, p0={REQUIRED: ZONE}, p1={REQUIRED: BLOCK}))
    assert view.problem == ("Disagreement", f"members' {REQUIRED} disagree (p1 says {BLOCK}, p0 says {ZONE}): "
                                            "give them one")
    assert view.group.min_count == 0 and view.group.topology is NO_TOPOLOGY


def test_a_disagreement_names_at_most_three_members_per_value():
    view = view_of(members(6, every={PREFERRED: RACK}, p5={PREFERRED: ZONE}))
    assert f"p0, p1, p2 and 2 more say {RACK}" in view.problem[1] and f"p5 says {ZONE}" in view.problem[1]


def test_a_finished_member_declaring_otherwise_is_no_disagreement():
    pods = members(3, every={REQUIRED: ZONE})
    pods.append(pod("old", {names.MIN_COUNT_ANNOTATION: "3", REQUIRED: BLOCK}, phase="Failed"))
    view = view_of(pods)
    assert view.problem is None and view.group.topology.required == ZONE


def test_a_gangs_spec_topology_works_like_the_annotations():
    view = view_of(members(8), gang(8, {"required": ZONE, "preferred": RACK, "sliceRequired": CLIQUE, "sliceSize": 4}))
    assert view.problem is None
    assert view.group.topology == TopologyRule(required=ZONE, preferred=RACK, slice_required=CLIQUE, slice_size=4)


def test_the_gang_and_the_members_each_may_declare_part_of_the_rule():
    view = view_of(members(4, every={PREFERRED: RACK}), gang(4, {"required": ZONE}))
    assert view.problem is None and view.group.topology == TopologyRule(required=ZONE, preferred=RACK)


def test_members_that_disagree_with_their_gang_are_a_declaration_problem():
    view = view_of(members(2, every={REQUIRED: BLOCK}), gang(2, {"required": ZONE}))
    assert view.problem == ("Disagreement", f"members' {REQUIRED} and Gang g's spec.topology.required disagree "
                                            f"(p0, p1 say {BLOCK}; the Gang says {ZONE}): give them one")


def test_a_group_that_is_not_a_multiple_of_the_slice_size_says_so():
    view = view_of(members(6, every={SLICE_REQUIRED: CLIQUE, SLICE_SIZE: "4"}))
    assert view.problem == ("InvalidTopology", f"group of 6 is not a multiple of {SLICE_SIZE} 4")
    assert view.group.min_count == 0


def test_sixteen_members_in_slices_of_four_are_fine():
    view = view_of(members(16, every={SLICE_REQUIRED: CLIQUE, SLICE_SIZE: "4"}))
    assert view.problem is None and view.group.topology == TopologyRule(slice_required=CLIQUE, slice_size=4)


def test_a_gangs_slice_size_must_divide_its_group_too():
    view = view_of(members(6), gang(6, {"sliceRequired": CLIQUE, "sliceSize": 4}))
    assert view.problem == ("InvalidTopology", "group of 6 is not a multiple of Gang g's spec.topology.sliceSize 4")


@pytest.mark.parametrize("declared, missing", [
    ({SLICE_SIZE: "4"}, SLICE_REQUIRED),
    ({SLICE_REQUIRED: CLIQUE}, SLICE_SIZE),
])
def test_a_slice_size_without_its_label_or_the_reverse_is_a_problem(declared, missing):
    view = view_of(members(4, every=declared))
    (given,) = declared
    assert view.problem == ("InvalidTopology", f"{given} is set without {missing}: a slice needs both the label its "
                                               "members share and its size; give both, or neither")


def test_a_gangs_slice_size_without_its_label_names_the_gangs_field():
    view = view_of(members(4), gang(4, {"sliceSize": 2}))
    assert view.problem[0] == "InvalidTopology"
    assert view.problem[1].startswith("Gang g's spec.topology.sliceSize is set without spec.topology.sliceRequired")


def test_a_value_that_is_no_label_key_is_a_problem_and_every_fault_is_told_at_once():
    view = view_of(members(4, every={REQUIRED: "Bad Key", SLICE_REQUIRED: CLIQUE, SLICE_SIZE: "four"}))
    reason, message = view.problem
    assert reason == "InvalidTopology"
    assert message.startswith(f'{REQUIRED} "Bad Key" is not accepted: write a label key such as {ZONE}')
    assert f"{SLICE_SIZE} is not accepted: write the members in one slice, a whole number from 1 to 100000" in message


@pytest.mark.parametrize("topology", [
    {"required": ["a", "list"]},
    {"required": 7},
    {"sliceRequired": CLIQUE, "sliceSize": "4"},
    {"sliceRequired": CLIQUE, "sliceSize": True},
    {"sliceRequired": CLIQUE, "sliceSize": 0},
    {"sliceRequired": CLIQUE, "sliceSize": {"nested": [1]}},
])
def test_a_gang_the_schema_should_have_refused_is_a_problem_never_a_crash(topology):
    view = view_of(members(4), gang(4, topology))
    assert view.problem is not None and view.problem[0] == "InvalidTopology"


def test_a_size_problem_comes_first_and_the_topology_is_not_judged():
    view = view_of(members(2, size=False, every={SLICE_SIZE: "3"}))
    assert view.problem[0] == "UnknownSize"
