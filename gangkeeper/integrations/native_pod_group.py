"""The native PodGroup, `scheduling.k8s.io/v1beta1` (Kubernetes 1.37, behind `GenericWorkload`):
docs/design.md, "Group identity", rule 2.

Pods labelled `scheduling.k8s.io/pod-group`, as some 1.37 guides write it, form the group of that
name, sized by the PodGroup's `spec.schedulingPolicy.gang.minCount` where the API serves
PodGroups (a Gang of that name or the pods' `gangkeeper.io/min-count` may declare it too; all
must agree). We read this label; we never coin keys under `k8s.io`. Pods that joined a native gang through `spec.schedulingGroup` are the native
scheduler's and are left alone (gangkeeper.identity). A PodGroup has no suspend switch.
"""

from collections.abc import Mapping

from gangkeeper import names
from gangkeeper.integrations.finding import Classification, named_by
from gangkeeper.integrations.kind import LIST_AND_WATCH, Declaration, Integration, ObjectRef, Resource

RESOURCE = Resource(*names.NATIVE_POD_GROUP_API, names.POD_GROUP_KIND)


def group_of(pod: Mapping) -> Classification | None:
    return named_by(pod, "label", names.NATIVE_POD_GROUP_LABEL, names.SOURCE_NATIVE_POD_GROUP)


def declaration(pod_group: Mapping) -> Declaration:
    gang = ((pod_group.get("spec") or {}).get("schedulingPolicy") or {}).get("gang") or {}
    return {"sizes": {"": int(gang.get("minCount") or 0)}}


def declarer(group: str, labels: Mapping[str, str], owner: tuple[str, str] | None) -> ObjectRef:
    """The PodGroup the label names, as written (the group label holds it made a label value)."""
    return labels.get(names.NATIVE_POD_GROUP_LABEL, group), None


INTEGRATION = Integration(
    sources=(names.SOURCE_NATIVE_POD_GROUP,), group_of=group_of, resource=RESOURCE, declaration=declaration,
    verbs=LIST_AND_WATCH, declarer=declarer, kept_labels=(names.NATIVE_POD_GROUP_LABEL,),
    names_group=(("labels", names.NATIVE_POD_GROUP_LABEL),),
)
