"""LeaderWorkerSet: one gang per replica group, found whichever webhook runs first; under LeaderReady
the leader and its workers apart."""

import hashlib

import pytest

from gangkeeper import identity, names
from gangkeeper.integrations import lws
from tests.integrations.pods import owner, pod

LWS = "leaderworkerset-sample"
REVISION = "5d8f7c9b4"
LEADER_SET_UID, WORKER_SET_UID = "9f3b6c1e-0a4d-4e1b-8c55-2f6a7d9e0b11", "4e2a8d70-51c3-4b9e-a6f1-0c7d3e5b8a22"
# What only LWS's own pod webhook adds at CREATE: a leader's group index and key, a worker's index.
LEADER_LABELS_OF_LWS_WEBHOOK = (names.LWS_GROUP_INDEX_LABEL, "leaderworkerset.sigs.k8s.io/group-key")


def group_key(namespace: str, leader: str) -> str:
    return hashlib.sha1(f"{namespace}/{leader}".encode()).hexdigest()


def statefulset_labels(name: str, ordinal: int, pod_index_label: bool = True) -> dict:
    """What the StatefulSet controller puts on each pod it makes (the pod-index label since 1.28)."""
    labels = {names.STATEFULSET_POD_NAME_LABEL: name, "controller-revision-hash": f"{name}-6c9f8b7d5"}
    if pod_index_label:
        labels[names.STATEFULSET_POD_INDEX_LABEL] = str(ordinal)
    return labels


def leader(group: int = 0, *, labelled_by_lws: bool, revision: str = REVISION, pod_index_label: bool = True,
           gpus: int = 1) -> dict:
    """A leader pod as the leader StatefulSet makes it, before or after LWS's webhook labelled it."""
    name = f"{LWS}-{group}"
    labels = {names.LWS_NAME_LABEL: LWS, names.LWS_WORKER_INDEX_LABEL: "0", names.LWS_REVISION_LABEL: revision,
              **statefulset_labels(name, group, pod_index_label)}
    if labelled_by_lws:
        labels.update({names.LWS_GROUP_INDEX_LABEL: str(group),
                       "leaderworkerset.sigs.k8s.io/group-key": group_key("ml", name)})
    return pod(name, labels, {"leaderworkerset.sigs.k8s.io/size": "4"}, gpus=gpus,
               owners=[owner("StatefulSet", LWS, LEADER_SET_UID, "apps/v1")])


def worker(group: int = 0, index: int = 1, *, labelled_by_lws: bool, revision: str = REVISION) -> dict:
    """A worker pod as its leader's worker StatefulSet makes it, before or after LWS's webhook."""
    leader_name, name = f"{LWS}-{group}", f"{LWS}-{group}-{index}"
    labels = {names.LWS_NAME_LABEL: LWS, names.LWS_GROUP_INDEX_LABEL: str(group), names.LWS_REVISION_LABEL: revision,
              "leaderworkerset.sigs.k8s.io/group-key": group_key("ml", leader_name), **statefulset_labels(name, index)}
    if labelled_by_lws:
        labels[names.LWS_WORKER_INDEX_LABEL] = str(index)
    annotations = {"leaderworkerset.sigs.k8s.io/size": "4", "leaderworkerset.sigs.k8s.io/leader-name": leader_name}
    return pod(name, labels, annotations, gpus=1, owners=[owner("StatefulSet", leader_name, WORKER_SET_UID, "apps/v1")])


def group(pod_: dict) -> str:
    found = lws.group_of(pod_)
    assert found is not None and found.identity.source == names.SOURCE_LEADERWORKERSET
    return found.identity.name


@pytest.mark.parametrize("labelled_by_lws", [False, True], ids=["gangkeeper first", "lws first"])
def test_a_leader_and_its_workers_are_one_group_whichever_webhook_runs_first(labelled_by_lws):
    members = [leader(labelled_by_lws=labelled_by_lws),
               *(worker(index=i, labelled_by_lws=labelled_by_lws) for i in (1, 2, 3))]
    assert {group(member) for member in members} == {f"{LWS}-0-{REVISION}"}


def test_a_leader_is_grouped_alike_before_and_after_lws_labels_it():
    before, after = leader(3, labelled_by_lws=False), leader(3, labelled_by_lws=True)
    assert set(LEADER_LABELS_OF_LWS_WEBHOOK) - set(before["metadata"]["labels"]) == set(LEADER_LABELS_OF_LWS_WEBHOOK)
    assert group(before) == group(after) == f"{LWS}-3-{REVISION}"
    assert lws.group_of(before).reason == (f"LeaderWorkerSet {LWS}, group 3 (template revision {REVISION}), "
                                           "its leader")


def test_without_the_pod_index_label_a_leaders_group_is_the_ordinal_ending_its_name():
    """Kubernetes 1.27's StatefulSet controller writes no apps.kubernetes.io/pod-index."""
    bare = leader(12, labelled_by_lws=False, pod_index_label=False)
    assert group(bare) == f"{LWS}-12-{REVISION}" == group(worker(12, labelled_by_lws=False))


def test_each_replica_group_is_a_group_of_its_own():
    assert len({group(leader(g, labelled_by_lws=True)) for g in range(3)}) == 3


def test_a_new_template_revision_never_joins_the_old_revisions_group():
    old, new = worker(labelled_by_lws=True), worker(labelled_by_lws=True, revision="6f7a8b9c0")
    assert group(old) != group(new)
    assert group(new) == group(leader(labelled_by_lws=False, revision="6f7a8b9c0"))


def test_pods_of_no_lws_or_without_a_group_index_are_left_to_the_other_rules():
    assert lws.group_of(pod(labels={"app": "web"}, gpus=1)) is None
    stray = worker(labelled_by_lws=True)
    del stray["metadata"]["labels"][names.LWS_GROUP_INDEX_LABEL]
    assert lws.group_of(stray) is None


@pytest.mark.parametrize("labelled_by_lws", [False, True], ids=["gangkeeper first", "lws first"])
def test_the_webhooks_answer_is_the_same_when_it_runs_again_on_its_own_result(labelled_by_lws):
    """reinvocationPolicy IfNeeded: when LWS's webhook runs after gangkeeper's and labels the pod,
    gangkeeper's runs again; it must find the group its first answer wrote, from the same rule."""
    first = identity.classify(leader(labelled_by_lws=False), namespace="ml")
    again = leader(labelled_by_lws=labelled_by_lws)
    again["metadata"]["labels"][names.GROUP_LABEL] = first.identity.name
    again["metadata"]["annotations"][names.GROUP_SOURCE_ANNOTATION] = first.identity.source
    assert identity.classify(again, namespace="ml").identity == first.identity
    assert first.identity.source == names.SOURCE_LEADERWORKERSET


def test_a_long_name_is_shortened_alike_for_leader_and_workers():
    name = "a-leaderworkerset-with-a-name-long-enough-to-need-shortening"
    members = [leader(labelled_by_lws=False), worker(labelled_by_lws=True)]
    for member in members:
        member["metadata"]["labels"][names.LWS_NAME_LABEL] = name
    assert len({group(member) for member in members}) == 1
    assert len(group(members[0])) <= 63


def lws_object(size: int, startup_policy: str | None = None, replicas: int = 2) -> dict:
    spec = {"replicas": replicas, "leaderWorkerTemplate": {"size": size, "workerTemplate": {"spec": {}}}}
    if startup_policy:
        spec["startupPolicy"] = startup_policy
    return {"metadata": {"name": LWS, "namespace": "ml", "uid": "11"}, "spec": spec}


@pytest.mark.parametrize("policy", [None, "LeaderCreated"])
def test_a_leader_created_group_is_the_leader_and_its_workers(policy):
    assert lws.declaration(lws_object(4, policy)) == {"sizes": {"": 4}}


def test_under_leader_ready_the_leader_and_its_workers_are_parts_of_their_own():
    declared = lws.declaration(lws_object(4, "LeaderReady"))
    assert declared["sizes"] == {"leader": 1, "workers": 3}
    assert declared["parts"] == {"0": "leader", "1": "workers", "2": "workers", "3": "workers"}


def test_a_group_of_one_is_one_group_under_either_policy():
    assert lws.declaration(lws_object(1, "LeaderReady")) == lws.declaration(lws_object(1)) == {"sizes": {"": 1}}


def test_the_size_is_per_replica_group_whatever_the_replicas():
    assert lws.declaration(lws_object(4, replicas=1)) == lws.declaration(lws_object(4, replicas=9))


def test_the_lws_its_name_label_names_declares_found_by_name_alone():
    labels = worker(labelled_by_lws=True)["metadata"]["labels"]
    assert lws.declarer(f"{LWS}-0-{REVISION}", labels, ("leaderworkerset-sample-0", WORKER_SET_UID)) == (LWS, None)
    assert set(lws.INTEGRATION.kept_labels) == {names.LWS_NAME_LABEL, names.LWS_WORKER_INDEX_LABEL}
    assert lws.INTEGRATION.part_label == names.LWS_WORKER_INDEX_LABEL and lws.INTEGRATION.owns_pods


def test_an_lws_has_no_suspend_switch_and_is_only_read():
    assert lws.INTEGRATION.suspension is None
    assert lws.INTEGRATION.verbs == {"list", "watch"} and not lws.INTEGRATION.status_verbs
    assert lws.RESOURCE.path("ml", LWS) == f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/ml/leaderworkersets/{LWS}"


def tree_lws(startup_policy=None, **annotations):
    spec = {"replicas": 3, "leaderWorkerTemplate": {"size": 4}}
    if startup_policy:
        spec["startupPolicy"] = startup_policy
    return {"metadata": {"name": "serve", "annotations": {names.TREE_ANNOTATION: names.TREE_BY_REPLICA_GROUP,
                                                          **annotations}}, "spec": spec}


def test_an_lws_asked_to_form_a_tree_declares_a_parent_of_its_replica_groups():
    declared = lws.declaration(tree_lws(**{names.TOPOLOGY_REQUIRED_ANNOTATION: "topology.kubernetes.io/zone"}))
    assert declared == {"sizes": {"": 4}, "parent": "serve", "min_group_count": 3,
                        "topology": {"required": "topology.kubernetes.io/zone"}}
    assert lws.declaration(tree_lws(**{names.MIN_GROUP_COUNT_ANNOTATION: "2"}))["min_group_count"] == 2


def test_an_lws_started_leader_ready_forms_no_tree():
    assert "parent" not in lws.declaration(tree_lws(names.LWS_LEADER_READY))
