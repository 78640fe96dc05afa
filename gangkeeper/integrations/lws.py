"""LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): one gang per replica group (docs/design.md,
"Group identity", rule 8).

An LWS runs `replicas` groups, each a leader pod (from a StatefulSet the LWS owns) and `size - 1`
workers (from a StatefulSet the leader pod owns) that serve one model together: a group is of no
use until all of it runs, and the groups never wait for one another. So each replica group is a
gang of its own.

Identity: `<lws>-<group index>-<template revision>`, the name LWS gives a replica group itself
(its Volcano PodGroup's). LWS's own pod webhook adds the group index to a leader at CREATE, and
gangkeeper's webhook may run before it, so the group is found from what is on the pod either way:
- a leader (worker index `0`, from the leader StatefulSet's template) has the LWS name and the
  revision from that template, and its ordinal: LWS's `group-index` label when its webhook ran
  first, else the StatefulSet's `apps.kubernetes.io/pod-index` label (Kubernetes 1.28+), else the
  number ending its name, which is where LWS's webhook takes the group index from;
- a worker has the LWS name, group index and revision its leader's were, copied onto the
  template of the worker StatefulSet.
Every source gives the same name, so the webhook's answer does not depend on the order, and when
LWS's webhook runs after it and changes the pod, running gangkeeper's again
(`reinvocationPolicy: IfNeeded`) changes nothing. The revision keeps the pods of a new template
(a rolling update, an LWS re-created from another template) out of the old one's groups. No UID
of the LWS or of a leader reaches the pods (LWS's `group-key` label is a hash of the namespace and
the leader pod's name), so an LWS deleted and created again from the same template names its
groups as the old one did; the old one's pods are then all being garbage-collected.

Startup: under `startupPolicy: LeaderCreated` (the default) the worker StatefulSet is created as
soon as the leader pod exists, and the group is the leader and its workers, `size` pods. Under
`LeaderReady` the workers are created only once the leader is Ready: a gang counting the leader
would keep it gated, waiting for workers that come only after it runs. The LWS then splits the
group by the worker index (`parts`): the leader alone, then its `size - 1` workers, each a gang,
so that no worker runs before all of them can and the leader never waits for them.

Asked with the annotation `gangkeeper.io/tree: replicaGroup` (and started LeaderCreated), its
replica groups are the children of one parent Gang the controller makes, named after the LWS
(issue 25, `controller.cache.trees`): `gangkeeper.io/min-group-count` of them (default: `replicas`)
must all be placeable together, inside the LWS's own `gangkeeper.io/topology-required` domain.
Under LeaderReady the annotation is not read: a tree would hold the leaders for workers that come
only once they run.

No suspend switch: a rollback deletes the group's pods, loudly (an audit line per pod, Warning
Events), and the StatefulSets create them again, gated.
"""

import re
from collections.abc import Mapping

from gangkeeper import names
from gangkeeper.integrations.finding import Classification, found, labels_and_annotations
from gangkeeper.integrations.kind import LIST_AND_WATCH, Declaration, Integration, ObjectRef, Resource, as_tree

RESOURCE = Resource(*names.LWS_API, names.LWS_KIND)
LEADER, WORKERS = "leader", "workers"
# The ordinal a StatefulSet ends its pods' names with (LWS's statefulsetutils.GetParentNameAndOrdinal).
_ORDINAL = re.compile(r"^.*-([0-9]+)$")


def group_of(pod: Mapping) -> Classification | None:
    labels, _ = labels_and_annotations(pod)
    lws = labels.get(names.LWS_NAME_LABEL)
    leader = labels.get(names.LWS_WORKER_INDEX_LABEL) == names.LWS_LEADER_WORKER_INDEX
    index = leader_ordinal(pod) if leader else labels.get(names.LWS_GROUP_INDEX_LABEL)
    if not lws or not index:
        return None
    revision = labels.get(names.LWS_REVISION_LABEL, "")
    role = "its leader" if leader else "a worker"
    return found("-".join(part for part in (lws, index, revision) if part), names.SOURCE_LEADERWORKERSET,
                 f"LeaderWorkerSet {lws}, group {index} (template revision {revision or 'none'}), {role}")


def leader_ordinal(pod: Mapping) -> str | None:
    """A leader's group index, the same whether LWS's webhook has labelled it yet or not."""
    labels, _ = labels_and_annotations(pod)
    for key in (names.LWS_GROUP_INDEX_LABEL, names.STATEFULSET_POD_INDEX_LABEL):
        if labels.get(key, "").isdigit():
            return labels[key]
    name = labels.get(names.STATEFULSET_POD_NAME_LABEL) or (pod.get("metadata") or {}).get("name") or ""
    ordinal = _ORDINAL.match(name)
    return str(int(ordinal.group(1))) if ordinal else None


def declaration(lws: Mapping) -> Declaration:
    """`size` pods per replica group; under LeaderReady the leader and its workers as two parts.
    Asked to (`gangkeeper.io/tree: replicaGroup`, LeaderCreated), its replica groups are one tree."""
    spec = lws.get("spec") or {}
    size = int((spec.get("leaderWorkerTemplate") or {}).get("size", 1))
    if spec.get("startupPolicy") != names.LWS_LEADER_READY or size < 2:
        declared: Declaration = {"sizes": {"": size}}
        tree = ((lws.get("metadata") or {}).get("annotations") or {}).get(names.TREE_ANNOTATION)
        if tree == names.TREE_BY_REPLICA_GROUP:
            as_tree(declared, lws, int(spec.get("replicas", 1)))
        return declared
    parts = {str(worker): WORKERS for worker in range(1, size)}
    return {"sizes": {LEADER: 1, WORKERS: size - 1}, "parts": {names.LWS_LEADER_WORKER_INDEX: LEADER, **parts}}


def declarer(group: str, labels: Mapping[str, str], owner: tuple[str, str] | None) -> ObjectRef:
    """The LWS its name label names. Its pods' owners are StatefulSets and they carry no UID of
    it, so it is found by name alone."""
    return labels.get(names.LWS_NAME_LABEL, ""), None


INTEGRATION = Integration(
    sources=(names.SOURCE_LEADERWORKERSET,), group_of=group_of, resource=RESOURCE, declaration=declaration,
    verbs=LIST_AND_WATCH, declarer=declarer, kept_labels=(names.LWS_NAME_LABEL, names.LWS_WORKER_INDEX_LABEL),
    owns_pods=True, part_label=names.LWS_WORKER_INDEX_LABEL,
)
