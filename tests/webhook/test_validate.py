"""/validate policy: the gate's guard, declaration checks (all problems at once), Gangs, warnings."""

import pytest

from gangkeeper import names
from gangkeeper.webhook.policy import Policy
from gangkeeper.webhook.review import parse_review
from gangkeeper.webhook.validate import validate
from tests.webhook.builders import container, placeholder, pod, pytorchjob_pod, review

POLICY = Policy()
CONTROLLER = names.DEFAULT_CONTROLLER_USERNAME
MIN, TIMEOUT = names.MIN_COUNT_ANNOTATION, names.SCHEDULE_TIMEOUT_ANNOTATION
CAPACITY_FOR = names.CAPACITY_FOR_LABEL


def judged(obj, **request):
    return validate(parse_review(review(obj, **request)), POLICY)


def gated(**kw):
    return pod("p-0", gpus=1, gates=["example.com/other", names.SCHEDULING_GATE],
               labels={names.GROUP_LABEL: "g"} | kw.pop("labels", {}), **kw)


def ungated(**kw):
    return pod("p-0", gpus=1, gates=["example.com/other"], labels={names.GROUP_LABEL: "g"} | kw.pop("labels", {}),
               **kw)


@pytest.mark.parametrize("user, allowed", [(CONTROLLER, True), ("alice", False), ("kubernetes-admin", False)])
def test_only_the_controller_removes_the_gate(user, allowed):
    verdict = judged(ungated(), operation="UPDATE", old=gated(), user=user)
    assert verdict.allowed is allowed
    if not allowed:
        assert user in verdict.message and CONTROLLER in verdict.message


def test_another_gate_removed_by_anyone_is_fine():
    old = pod("p-0", gpus=1, gates=["example.com/other", names.SCHEDULING_GATE])
    new = pod("p-0", gpus=1, gates=[names.SCHEDULING_GATE])
    assert judged(new, operation="UPDATE", old=old, user="alice").allowed


def test_the_configured_controller_username_is_the_one_allowed():
    request = parse_review(review(ungated(), operation="UPDATE", old=gated(), user="robot"))
    assert validate(request, Policy(controller_username="robot")).allowed


@pytest.mark.parametrize("new_group", ["other", None])
def test_group_of_a_gated_pod_cannot_change(new_group):
    new = gated()
    if new_group:
        new["metadata"]["labels"][names.GROUP_LABEL] = new_group
    else:
        del new["metadata"]["labels"][names.GROUP_LABEL]
    verdict = judged(new, operation="UPDATE", old=gated(), user=CONTROLLER)
    assert not verdict.allowed and names.GROUP_LABEL in verdict.message


def test_group_of_a_released_pod_may_change():
    assert judged(ungated(labels={names.GROUP_LABEL: "h"}), operation="UPDATE", old=ungated(), user="bob").allowed


@pytest.mark.parametrize("user", ["alice", "kubernetes-admin", "system:serviceaccount:ml-training:gangkeeper-controller",
                                  ""])
def test_only_the_controller_creates_a_placeholder(user):
    """The webhook never gates a placeholder: anyone else's would start at once, gang scheduling skipped."""
    refused = judged(placeholder(), user=user)
    assert refused.problems == (f'metadata.labels[{CAPACITY_FOR}]: {user or "an anonymous user"} created a pod '
                                f'labelled "bert"; only {CONTROLLER} creates placeholder pods (pause pods holding '
                                "capacity for a waiting group, never gated); remove the label",)
    allowed = judged(placeholder(), user=CONTROLLER)
    assert allowed.allowed and allowed.reason == "placeholder pod CREATE: valid"


def test_the_configured_controller_username_is_the_one_that_creates_placeholders():
    assert validate(parse_review(review(placeholder(), user="robot")), Policy(controller_username="robot")).allowed
    assert not validate(parse_review(review(placeholder(), user=CONTROLLER)), Policy(controller_username="robot")).allowed


def relabelled(obj, value):
    obj["metadata"]["labels"].pop(CAPACITY_FOR, None)
    if value is not None:
        obj["metadata"]["labels"][CAPACITY_FOR] = value
    return obj


PLACEHOLDER_CHANGES = [
    ("a gated member becomes one", gated(), relabelled(gated(), "g"), 'set to "g"'),
    ("a released member becomes one", ungated(), relabelled(ungated(), "g"), 'set to "g"'),
    ("a placeholder stops being one", placeholder(), relabelled(placeholder(), None), 'removed (it was "bert")'),
    ("a placeholder moves to another group", placeholder(), relabelled(placeholder(), "gpt"),
     'changed from "bert" to "gpt"'),
]


@pytest.mark.parametrize("user", ["alice", CONTROLLER])
@pytest.mark.parametrize("scenario, old, new, change", PLACEHOLDER_CHANGES, ids=[c[0] for c in PLACEHOLDER_CHANGES])
def test_no_pod_becomes_a_placeholder_or_stops_being_one(scenario, old, new, change, user):
    """A member turned placeholder would leave its group uncounted; a placeholder turned ordinary
    pod would hold its node outside every group and every clean-up. Nobody does either, not even the
    controller (whose pod updates deploy/'s matchConditions do not send: it never makes these)."""
    verdict = judged(new, operation="UPDATE", old=old, user=user)
    assert verdict.problems == (f"metadata.labels[{CAPACITY_FOR}]: {change} by {user}; it is set at creation only: "
                                "a placeholder keeps it, for the group it was created for, until the controller "
                                "deletes the pod, and no other pod can take it (leave it as it was)",)


def test_a_placeholder_updated_otherwise_is_allowed():
    touched = placeholder(annotations={"note": "seen"})
    verdict = judged(touched, operation="UPDATE", old=placeholder(), user="alice")
    assert verdict.allowed and verdict.reason == "placeholder pod UPDATE: valid"


BAD_DECLARATIONS = [
    ("min-count not a number", {"annotations": {MIN: "four"}}, f"metadata.annotations[{MIN}]", '"four"'),
    ("min-count zero", {"annotations": {MIN: "0"}}, f"metadata.annotations[{MIN}]", "from 1 to 100000"),
    ("min-count too big", {"annotations": {MIN: "100001"}}, f"metadata.annotations[{MIN}]", '"100001"'),
    ("min-count negative", {"annotations": {MIN: "-3"}}, f"metadata.annotations[{MIN}]", '"-3"'),
    ("min-count with spaces", {"annotations": {MIN: " 4"}}, f"metadata.annotations[{MIN}]", '" 4"'),
    ("timeout negative", {"annotations": {TIMEOUT: "-1"}}, f"metadata.annotations[{TIMEOUT}]", "from 0 to"),
    ("timeout fractional", {"annotations": {TIMEOUT: "1.5"}}, f"metadata.annotations[{TIMEOUT}]", '"1.5"'),
    ("group empty", {"labels": {names.GROUP_LABEL: ""}}, f"metadata.labels[{names.GROUP_LABEL}]", "non-empty"),
    ("group not a label value", {"labels": {names.GROUP_LABEL: "-bad-"}}, names.GROUP_LABEL, "at most 63"),
    ("two groups", {"labels": {names.GROUP_LABEL: "a", names.PLUGINS_POD_GROUP_LABEL: "b"}},
     names.PLUGINS_POD_GROUP_LABEL, "different groups"),
    ("label and Volcano annotation disagree",
     {"labels": {names.NATIVE_POD_GROUP_LABEL: "a"}, "annotations": {names.VOLCANO_GROUP_ANNOTATION: "b"}},
     names.VOLCANO_GROUP_ANNOTATION, "different groups"),
]


@pytest.mark.parametrize("scenario, metadata, field, says", BAD_DECLARATIONS, ids=[c[0] for c in BAD_DECLARATIONS])
def test_bad_declaration_on_create_is_denied(scenario, metadata, field, says):
    verdict = judged(pod("p-0", gpus=1, **metadata))
    assert not verdict.allowed
    assert field in verdict.message and says in verdict.message


def test_every_problem_is_listed_at_once():
    obj = pod("p-0", gpus=1, labels={names.GROUP_LABEL: "a", names.PLUGINS_POD_GROUP_LABEL: "b"},
              annotations={MIN: "x", TIMEOUT: "soon"})
    verdict = judged(obj)
    assert len(verdict.problems) == 3 and "3 problems" in verdict.message


def test_a_long_bad_value_is_cut_in_the_message():
    verdict = judged(pod("p-0", gpus=1, annotations={MIN: "9" * 5000}))
    assert not verdict.allowed and len(verdict.message) < 400 and "…" in verdict.message


@pytest.mark.parametrize("metadata", [
    {"annotations": {MIN: "4", TIMEOUT: "0"}},
    {"annotations": {MIN: "100000", TIMEOUT: "3600"}},
    {"labels": {names.GROUP_LABEL: "a", names.PLUGINS_POD_GROUP_LABEL: "a"}},
    {"labels": {"app": "x"}},
])
def test_good_declarations_are_allowed(metadata):
    assert judged(pod("p-0", gpus=1, **metadata)).allowed


def test_update_checks_only_what_it_changes():
    old = gated(annotations={MIN: "0"})  # stored before this policy existed
    assert judged(gated(annotations={MIN: "0", "bump": "1"}), operation="UPDATE", old=old, user="bob").allowed
    verdict = judged(gated(annotations={MIN: "0", TIMEOUT: "never"}), operation="UPDATE", old=old, user="bob")
    assert verdict.problems == (f'metadata.annotations[{TIMEOUT}]: "never" is not accepted: '
                                "write a number of seconds, a whole number from 0 to 2147483647",)


def test_an_accelerator_request_differing_from_its_limit_is_left_to_the_api_server():
    """The API server refuses it before validating webhooks run (tests/sim/test_extended_resources.py):
    a warning here could never be seen."""
    verdict = judged(pod("p-0", containers=[container("trainer", gpus=2, limit_gpus=4)]))
    assert verdict.allowed and verdict.warnings == ()


def test_min_count_on_a_pod_in_no_group_is_a_warning():
    verdict = judged(pod("web", annotations={MIN: "2"}))
    assert verdict.allowed and MIN in verdict.warnings[0] and "no group" in verdict.warnings[0]
    assert judged(pytorchjob_pod(annotations={MIN: "2"})).warnings == ()


def gang(spec, name="bert"):
    return {"apiVersion": f"{names.GANG_GROUP}/{names.GANG_VERSION}", "kind": names.GANG_KIND,
            "metadata": {"name": name, "namespace": "ml-training"}, "spec": spec}


GANG_CASES = [
    ({"minCount": 4}, []),
    ({"minCount": 4, "scheduleTimeoutSeconds": 600, "groupName": "bert-run"}, []),
    ({}, ["spec.minCount: missing"]),
    ({"minCount": "4"}, ['spec.minCount: "4" is not accepted']),
    ({"minCount": True}, ["spec.minCount: true is not accepted"]),
    ({"minCount": 0, "scheduleTimeoutSeconds": -5, "groupName": "Not Valid"},
     ["spec.minCount: 0", "spec.scheduleTimeoutSeconds: -5", 'spec.groupName: "Not Valid"']),
    # groups of groups (issue 25): a child names its parent, a parent has minGroupCount and no minCount
    ({"minCount": 2, "parent": "pair"}, []),
    ({"minGroupCount": 2, "topology": {"required": "topology.kubernetes.io/zone"}}, []),
    ({"minCount": 2, "minGroupCount": 2}, ["spec.minGroupCount: 2 is not accepted beside spec.minCount"]),
    ({"minGroupCount": 0}, ["spec.minGroupCount: 0 is not accepted: write a whole number from 1 to 1000"]),
    ({"minCount": 2, "parent": "Pair_1"}, ['spec.parent: "Pair_1" is not accepted: write the name of a parent Gang']),
    ({"minCount": 2, "parent": "bert"}, ['spec.parent: "bert" is not accepted: a Gang cannot be its own parent']),
    ({"minGroupCount": 2, "topology": {"sliceRequired": "example.com/rack", "sliceSize": 4}},
     ['spec.topology.sliceRequired: "example.com/rack" is not accepted on a parent',
      "spec.topology.sliceSize: 4 is not accepted on a parent"]),
]


@pytest.mark.parametrize("operation", ["CREATE", "UPDATE"])
@pytest.mark.parametrize("spec, problems", GANG_CASES)
def test_gang_objects(spec, problems, operation):
    obj = gang(spec)
    verdict = judged(obj, operation=operation, old=obj if operation == "UPDATE" else None,
                     kind=names.GANG_KIND, group=names.GANG_GROUP, version=names.GANG_VERSION)
    assert len(verdict.problems) == len(problems)
    for problem, expected in zip(verdict.problems, problems):
        assert problem.startswith(expected)


def test_a_pods_parent_label_names_a_gang_and_stays_while_the_pod_is_gated():
    refused = judged(pod("p", labels={names.GROUP_LABEL: "decode", names.PARENT_LABEL: "Pair_1"}))
    assert not refused.allowed
    assert f'metadata.labels[{names.PARENT_LABEL}]: "Pair_1" is not accepted: write the name of a parent Gang' \
        in refused.message
    old = gated(labels={names.GROUP_LABEL: "decode", names.PARENT_LABEL: "pair"})
    new = gated(labels={names.GROUP_LABEL: "decode", names.PARENT_LABEL: "other"})
    changed = judged(new, operation="UPDATE", old=old, user="alice")
    assert not changed.allowed and f"metadata.labels[{names.PARENT_LABEL}]: changed from" in changed.message


def test_gang_named_beyond_a_label_value_needs_a_group_name():
    obj = gang({"minCount": 2}, name="x" * 70)
    verdict = judged(obj, kind=names.GANG_KIND, group=names.GANG_GROUP, version=names.GANG_VERSION)
    assert verdict.problems[0].startswith("metadata.name:") and "spec.groupName" in verdict.problems[0]


@pytest.mark.parametrize("request_kw", [{"operation": "DELETE"}, {"kind": "ConfigMap"}])
def test_nothing_else_is_checked(request_kw):
    assert judged(pod("p", annotations={MIN: "bad"}), **request_kw).allowed


def test_group_source_of_a_gated_pod_cannot_change():
    old = gated(annotations={names.GROUP_SOURCE_ANNOTATION: names.SOURCE_EXPLICIT})
    new = gated(annotations={names.GROUP_SOURCE_ANNOTATION: names.SOURCE_PYTORCHJOB})
    verdict = judged(new, operation="UPDATE", old=old, user="alice")
    assert not verdict.allowed
    assert f"metadata.annotations[{names.GROUP_SOURCE_ANNOTATION}]" in verdict.message


@pytest.mark.parametrize("key", [names.RESERVED_NODE_ANNOTATION, names.RELEASED_AT_ANNOTATION])
def test_a_user_cannot_write_the_reservation_ledger(key):
    """A pod that reserved its own node would jump the queue; one that reset its release time
    would dodge the bind timeout."""
    on_create = judged(gated(annotations={key: "gpu-node-1"}), user="alice")
    assert not on_create.allowed and f'metadata.annotations[{key}]: set to "gpu-node-1" by alice' in on_create.message
    on_update = judged(gated(annotations={key: "gpu-node-2"}), operation="UPDATE",
                       old=gated(annotations={key: "gpu-node-1"}), user="alice")
    assert not on_update.allowed and 'changed to "gpu-node-2"' in on_update.message


def test_the_controller_writes_the_reservation_ledger():
    verdict = judged(gated(annotations={names.RESERVED_NODE_ANNOTATION: "gpu-node-1"}), operation="UPDATE",
                     old=gated(), user=CONTROLLER)
    assert verdict.allowed


def gang_status(reservations, **status):
    return {**gang({"minCount": 2}), "status": {**status, "reservations": reservations}}


def judged_status(new, old, user, *, well_formed=True):
    """A write of a Gang's status subresource, as the API server reviews it (or, not well formed,
    as the schema reads it: `dryRun` a string it converts)."""
    document = review(new, operation="UPDATE", old=old, user=user, kind=names.GANG_KIND, group=names.GANG_GROUP,
                      version=names.GANG_VERSION, sub_resource="status")
    if not well_formed:
        document["request"]["dryRun"] = "false"
    return validate(parse_review(document), POLICY)


@pytest.mark.parametrize("well_formed", [True, False])
def test_only_the_controller_writes_a_gangs_reservations(well_formed):
    """An entry books a node for a pod, which the controller then releases without it waiting its turn."""
    booked = {"p-0": {"uid": "u0", "node": "gpu-node-1"}}
    mine = {**booked, "p-1": {"uid": "u1", "node": "gpu-node-1"}}
    refused = judged_status(gang_status(mine), gang_status(booked), "alice", well_formed=well_formed)
    assert refused.problems == (f"status.reservations: alice changed the entries of p-1; only {CONTROLLER} writes "
                                "them (the nodes it booked for the group's members)",)
    assert judged_status(gang_status(mine), gang_status(booked), CONTROLLER, well_formed=well_formed).allowed
    other = judged_status(gang_status(booked, phase="Waiting"), gang_status(booked), "alice", well_formed=well_formed)
    assert other.allowed, "the rest of a Gang's status is not the reservation ledger"
