"""/mutate policy on realistic pods, and the patch it builds (including a property over random pods)."""

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gangkeeper import names
from gangkeeper.identity import GroupIdentity
from gangkeeper.webhook.mutate import ALLOWED, PATCHED, mutate
from gangkeeper.webhook.patch import _diffed_ops, _direct_ops, diff, gate_and_label
from gangkeeper.webhook.policy import Policy
from gangkeeper.webhook.review import parse_review
from tests.webhook.builders import applied, container, gate_names, owner, placeholder, pod, pytorchjob_pod, review

POLICY = Policy()
JOB_UID = "0b4e7c9a-1111-4a44-9f7e-1b2f2c8e9a01"
JOBSET_UID = "5c1d0f4e-2b7a-4c55-9d7e-7a1c0e2f9b10"


def jobset_pod(attempt="0"):
    labels = {names.JOBSET_NAME_LABEL: "trainer", names.JOBSET_UID_LABEL: JOBSET_UID,
              names.JOBSET_RESTART_ATTEMPT_LABEL: attempt, names.JOBSET_REPLICATED_JOB_LABEL: "workers",
              names.JOB_NAME_LABEL: "trainer-workers-0"}
    return pod("trainer-workers-0-0-x7k2p", labels=labels, gpus=8,
               owner=owner("Job", "trainer-workers-0", "aa11", "batch/v1"))


def indexed_job_pod():
    labels = {names.JOB_NAME_LABEL: "sweep", names.JOB_COMPLETION_INDEX: "3"}
    return pod("sweep-3-abcde", labels=labels, gpus=1, owner=owner("Job", "sweep", JOB_UID, "batch/v1"))


def mutated(obj, **request):
    return mutate(parse_review(review(obj, **request)), POLICY)


# (scenario, pod, decision, group, source)
CASES = [
    ("PyTorchJob master", pytorchjob_pod(role="master", gpus=1), PATCHED,
     "bert-6f1c7c1e-8f31-4a44-9f7e-1b2f2c8e9a01", names.SOURCE_PYTORCHJOB),
    ("PyTorchJob worker, 8 GPUs", pytorchjob_pod(), PATCHED,
     "bert-6f1c7c1e-8f31-4a44-9f7e-1b2f2c8e9a01", names.SOURCE_PYTORCHJOB),
    ("JobSet worker", jobset_pod(), PATCHED, f"trainer-{JOBSET_UID}-0", names.SOURCE_JOBSET),
    ("JobSet worker after a restart", jobset_pod("2"), PATCHED, f"trainer-{JOBSET_UID}-2", names.SOURCE_JOBSET),
    ("Indexed Job pod", indexed_job_pod(), PATCHED, f"sweep-{JOB_UID}", names.SOURCE_JOB),
    ("plain GPU pod", pod("notebook", gpus=1), PATCHED, "notebook", names.SOURCE_ACCELERATOR_POD),
    ("AMD GPU pod", pod("rocm", containers=[container(gpus=2, gpu_resource="amd.com/gpu")]), PATCHED, "rocm",
     names.SOURCE_ACCELERATOR_POD),
    ("CPU pod", pod("web"), ALLOWED, "", ""),
    ("explicit group on a CPU pod", pod("cpu-0", labels={names.GROUP_LABEL: "etl"}), PATCHED, "etl",
     names.SOURCE_EXPLICIT),
    ("scheduler-plugins pod group", pod("pg-0", labels={names.PLUGINS_POD_GROUP_LABEL: "pg"}), PATCHED, "pg",
     names.SOURCE_PLUGINS_POD_GROUP),
    ("Volcano pod group", pod("v-0", annotations={names.VOLCANO_GROUP_ANNOTATION: "vg"}), PATCHED, "vg",
     names.SOURCE_VOLCANO_POD_GROUP),
    ("long name", pod("x" * 80, gpus=1), PATCHED, None, names.SOURCE_ACCELERATOR_POD),
    ("Kueue-managed", pytorchjob_pod(labels={names.KUEUE_QUEUE_NAME_LABEL: "team-a"}), ALLOWED, "", ""),
    ("Kueue-gated", pod("k", gpus=1, gates=["kueue.x-k8s.io/admission"]), ALLOWED, "", ""),
    ("native gang member", pod("n", gpus=1, schedulingGroup={"podGroupName": "pg"}), ALLOWED, "", ""),
    ("bound at creation", pod("b", gpus=1, node_name="gpu-node-1", gates=["a.io/b"]), ALLOWED, "", ""),
]


@pytest.mark.parametrize("scenario, obj, decision, group, source", CASES, ids=[case[0] for case in CASES])
def test_classification(scenario, obj, decision, group, source):
    mutation = mutated(obj)
    assert mutation.decision == decision, mutation.reason
    assert mutation.source == source
    if decision == ALLOWED:
        assert mutation.ops == [] and mutation.reason
        return
    result = applied(obj, mutation.ops)
    label = result["metadata"]["labels"][names.GROUP_LABEL]
    assert label == (group or label) and len(label) <= 63
    assert gate_names(result)[-1] == names.SCHEDULING_GATE


def test_two_lone_generate_name_pods_get_different_groups():
    first = mutated(pod(None, generate_name="gen-", gpus=1), uid="aaaaaaaa-0000-4000-8000-000000000000")
    second = mutated(pod(None, generate_name="gen-", gpus=1), uid="bbbbbbbb-0000-4000-8000-000000000000")
    assert (first.group, second.group) == ("gen-aaaaaaaa", "gen-bbbbbbbb")


@pytest.mark.parametrize("obj", [
    placeholder(),
    placeholder(labels={names.GROUP_LABEL: "bert"}),
    pytorchjob_pod(labels={names.CAPACITY_FOR_LABEL: "bert"}),
], ids=["as the controller makes it", "with a group label", "shaped like a job's member"])
def test_a_placeholder_is_never_gated_nor_grouped(obj):
    """The controller creates it ungated on purpose, in an enforced namespace: an autoscaler adds
    nodes only for pods that are pending and not gated."""
    mutation = mutated(obj, user=names.DEFAULT_CONTROLLER_USERNAME)
    assert (mutation.decision, mutation.ops, mutation.source) == (ALLOWED, [], "")
    assert mutation.group == "bert", "its audit line names the group it holds capacity for"
    assert mutation.reason == f"a placeholder holding capacity for the group of Gang bert (label {names.CAPACITY_FOR_LABEL}): " \
                              "never a member"


def test_excluded_namespace_is_left_alone():
    assert mutated(pod("p", gpus=1), namespace=names.DEFAULT_NAMESPACE).decision == ALLOWED


@pytest.mark.parametrize("request_kw", [
    {"operation": "UPDATE", "old": pod("p", gpus=1)},
    {"operation": "DELETE"},
    {"kind": "Deployment", "group": "apps"},
])
def test_only_pod_create_is_mutated(request_kw):
    mutation = mutated(pod("p", gpus=1), **request_kw)
    assert (mutation.decision, mutation.ops) == (ALLOWED, [])
    assert mutation.unexpected == ("kind" in request_kw)


def test_existing_explicit_label_is_kept_and_its_source_recorded():
    obj = pytorchjob_pod(labels={names.GROUP_LABEL: "mine"})
    result = applied(obj, mutated(obj).ops)
    assert result["metadata"]["labels"][names.GROUP_LABEL] == "mine"
    assert result["metadata"]["annotations"][names.GROUP_SOURCE_ANNOTATION] == names.SOURCE_EXPLICIT


def test_fully_gated_pod_gets_no_patch():
    obj = pod("p", gpus=1, labels={names.GROUP_LABEL: "p"}, gates=["x.io/first", names.SCHEDULING_GATE],
              annotations={names.GROUP_SOURCE_ANNOTATION: names.SOURCE_ACCELERATOR_POD})
    assert mutated(obj).ops == []


def test_patch_escapes_slash_and_tilde_in_keys():
    obj = pod("p", labels={"a~b/c": "1"}, annotations={})
    ops = gate_and_label(obj, GroupIdentity("g", "explicit"))
    assert {"op": "add", "path": "/metadata/labels/gangkeeper.io~1group", "value": "g"} in ops
    assert applied(obj, ops)["metadata"]["labels"]["a~b/c"] == "1"


def test_patch_creates_missing_maps_and_spec():
    obj = {"metadata": {"name": "bare"}}
    result = applied(obj, gate_and_label(obj, GroupIdentity("bare", names.SOURCE_ACCELERATOR_POD)))
    assert result == {"metadata": {"name": "bare", "labels": {names.GROUP_LABEL: "bare"},
                                   "annotations": {names.GROUP_SOURCE_ANNOTATION: names.SOURCE_ACCELERATOR_POD}},
                      "spec": {"schedulingGates": [{"name": names.SCHEDULING_GATE}]}}


# --- property: for any pod, the patch adds exactly what it should and nothing else ----------

_keys = st.text(alphabet="ab~/.-_", min_size=1, max_size=6)
_gate = st.text(alphabet="abc./~", min_size=1, max_size=8).filter(lambda name: not name.startswith("kueue"))


@st.composite
def random_pods(draw):
    obj = pod(draw(st.sampled_from(["w-0", "train"])), gpus=draw(st.integers(0, 8)))
    if draw(st.booleans()):
        obj["metadata"]["labels"] = draw(st.dictionaries(_keys, st.text(max_size=3), max_size=4))
    if draw(st.booleans()):
        obj["metadata"]["annotations"] = draw(st.dictionaries(_keys, st.text(max_size=3), max_size=4))
    if draw(st.booleans()):
        obj["spec"]["schedulingGates"] = [{"name": name} for name in draw(st.lists(_gate, max_size=3, unique=True))]
    if draw(st.booleans()):
        obj["metadata"].setdefault("labels", {})[names.GROUP_LABEL] = draw(st.sampled_from(["g1", "team-a"]))
    return obj


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_pods())
def test_patch_adds_one_gate_label_and_annotation_and_nothing_else(obj):
    original = copy.deepcopy(obj)
    mutation = mutated(obj)
    assert obj == original, "the policy must not change its input"
    result = applied(obj, mutation.ops)
    if mutation.decision == ALLOWED:
        assert result == original
        return
    labels, annotations = result["metadata"]["labels"], result["metadata"]["annotations"]
    before = original["metadata"].get("labels") or {}
    assert labels[names.GROUP_LABEL] == before.get(names.GROUP_LABEL, mutation.group)
    assert annotations[names.GROUP_SOURCE_ANNOTATION] == mutation.source
    assert gate_names(result) == gate_names(original) + [names.SCHEDULING_GATE]
    for section, key in (("labels", names.GROUP_LABEL), ("annotations", names.GROUP_SOURCE_ANNOTATION)):
        _restore(result["metadata"], original["metadata"], section, key)
    result["spec"]["schedulingGates"].pop()
    if not result["spec"]["schedulingGates"] and "schedulingGates" not in original["spec"]:
        del result["spec"]["schedulingGates"]
    assert result == original
    assert mutated(applied(obj, mutation.ops)).ops == [], "a second pass changes nothing"


def _restore(metadata: dict, original: dict, section: str, key: str) -> None:
    """Put back what the original had under metadata[section][key] (or remove what it lacked)."""
    if key in (original.get(section) or {}):
        metadata[section][key] = original[section][key]
        return
    del metadata[section][key]
    if not metadata[section] and section not in original:
        del metadata[section]


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=3),
                           lambda children: st.lists(children, max_size=3)
                           | st.dictionaries(st.text(alphabet="a/~", max_size=3), children, max_size=3),
                           max_leaves=10)


@settings(max_examples=300, deadline=None)
@given(json_values, json_values)
def test_diff_turns_any_document_into_any_other(before, after):
    before, after = {"doc": before}, {"doc": after}
    assert applied(before, list(diff(before, after))) == after


def test_a_pod_cannot_claim_a_source_it_was_not_found_by():
    """A user labels a plain pod into a PyTorchJob's group and claims the job as its source: the
    label stands (it is theirs to write), but the source says what the pod really is."""
    victim_group = "bert-6f1c7c1e-8f31-4a44-9f7e-1b2f2c8e9a01"
    impostor = pod("sneaky", gpus=1, labels={names.GROUP_LABEL: victim_group},
                   annotations={names.GROUP_SOURCE_ANNOTATION: names.SOURCE_PYTORCHJOB})
    result = applied(impostor, mutated(impostor).ops)
    assert result["metadata"]["labels"][names.GROUP_LABEL] == victim_group
    assert result["metadata"]["annotations"][names.GROUP_SOURCE_ANNOTATION] == names.SOURCE_EXPLICIT


def test_a_label_that_matches_the_rules_keeps_the_rules_source():
    member = pytorchjob_pod()
    member["metadata"]["labels"][names.GROUP_LABEL] = "bert-6f1c7c1e-8f31-4a44-9f7e-1b2f2c8e9a01"
    mutation = mutated(member)
    assert mutation.source == names.SOURCE_PYTORCHJOB


# (scenario, pod, the exact ops): the ops the API server receives, in order, byte for byte.
EXACT_OPS = [
    ("no maps, no spec", {"metadata": {"name": "bare"}}, [
        {"op": "add", "path": "/metadata/labels", "value": {names.GROUP_LABEL: "g"}},
        {"op": "add", "path": "/metadata/annotations", "value": {names.GROUP_SOURCE_ANNOTATION: "explicit"}},
        {"op": "add", "path": "/spec", "value": {"schedulingGates": [{"name": names.SCHEDULING_GATE}]}}]),
    ("null maps", {"metadata": {"labels": None, "annotations": None}, "spec": {"schedulingGates": None}}, [
        {"op": "add", "path": "/metadata/labels", "value": {names.GROUP_LABEL: "g"}},
        {"op": "add", "path": "/metadata/annotations", "value": {names.GROUP_SOURCE_ANNOTATION: "explicit"}},
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": names.SCHEDULING_GATE}]}]),
    ("maps and another gate", {"metadata": {"labels": {"a": "1"}, "annotations": {names.GROUP_SOURCE_ANNOTATION: "x"}},
                               "spec": {"schedulingGates": [{"name": "x.io/first"}]}}, [
        {"op": "add", "path": "/metadata/labels/gangkeeper.io~1group", "value": "g"},
        {"op": "replace", "path": "/metadata/annotations/gangkeeper.io~1group-source", "value": "explicit"},
        {"op": "add", "path": "/spec/schedulingGates/1", "value": {"name": names.SCHEDULING_GATE}}]),
    ("labelled and gated already", {"metadata": {"labels": {names.GROUP_LABEL: "mine"}},
                                    "spec": {"schedulingGates": [{"name": names.SCHEDULING_GATE}]}}, [
        {"op": "add", "path": "/metadata/annotations", "value": {names.GROUP_SOURCE_ANNOTATION: "explicit"}}]),
]


@pytest.mark.parametrize("scenario, obj, ops", EXACT_OPS, ids=[case[0] for case in EXACT_OPS])
def test_the_patch_is_these_ops_in_this_order(scenario, obj, ops):
    original = copy.deepcopy(obj)
    assert gate_and_label(obj, GroupIdentity("g", "explicit")) == ops
    assert obj == original


def test_diff_removes_what_after_lacks_and_replaces_what_changed_type():
    assert diff({"a": 1, "b": [1], "c": {"d": 1}}, {"b": {"x": 1}, "c": {}}) == [
        {"op": "remove", "path": "/a"}, {"op": "replace", "path": "/b", "value": {"x": 1}},
        {"op": "remove", "path": "/c/d"}]


_source = st.sampled_from([names.SOURCE_EXPLICIT, names.SOURCE_PYTORCHJOB, names.SOURCE_ACCELERATOR_POD])
_maybe_map = st.one_of(st.none(), st.dictionaries(st.sampled_from(
    ["a", "a~b/c", names.GROUP_LABEL, names.GROUP_SOURCE_ANNOTATION]), st.one_of(_source, st.text(max_size=3)),
    max_size=3))
_maybe_gates = st.one_of(st.none(), st.just("not a list"), st.lists(st.one_of(
    st.fixed_dictionaries({"name": st.one_of(_gate, st.just(names.SCHEDULING_GATE))}), st.just("x")), max_size=3))


@st.composite
def touched_fields(draw):
    """Pods that differ only where a patch may touch: maps present, absent or null, gates of
    every kind, sections missing."""
    obj = {}
    if draw(st.booleans()):
        obj["metadata"] = {key: value for key in ("labels", "annotations")
                           if (value := draw(_maybe_map)) is not None or draw(st.booleans())}
    elif draw(st.booleans()):
        obj["metadata"] = None
    if draw(st.booleans()):
        obj["spec"] = {} if draw(st.booleans()) else {"schedulingGates": draw(_maybe_gates)}
    return obj


@pytest.mark.slow
@settings(max_examples=1000, deadline=None)
@given(touched_fields(), st.sampled_from(["g", names.GROUP_LABEL]), _source)
def test_the_direct_ops_are_the_diffs_ops_wherever_they_answer(obj, name, source):
    identity = GroupIdentity(name, source)
    direct = _direct_ops(obj, identity)
    if direct is not None:
        assert direct == _diffed_ops(obj, identity)


def test_the_direct_ops_answer_for_the_pods_workload_controllers_create():
    for obj in (pytorchjob_pod(), pod("p"), pod("p", labels={}, annotations={}, gates=["x.io/first"]),
                pod("p", labels={}, annotations={names.GROUP_SOURCE_ANNOTATION: names.SOURCE_PYTORCHJOB})):
        assert _direct_ops(obj, GroupIdentity("g", names.SOURCE_EXPLICIT)) is not None
