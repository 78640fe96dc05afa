"""The PodGroup of scheduler-plugins' coscheduling, `scheduling.x-k8s.io/v1alpha1` (docs/design.md,
"Group identity", rule 3).

Pods labelled `scheduling.x-k8s.io/pod-group` (scheduler-plugins' PodGroupLabel) form the group
of that name, sized by the PodGroup's `spec.minMember`. It has no suspend switch.
"""

from collections.abc import Mapping

from gangkeeper import names
from gangkeeper.integrations.finding import Classification, named_by
from gangkeeper.integrations.kind import LIST_AND_WATCH, Declaration, Integration, ObjectRef, Resource

RESOURCE = Resource(*names.PLUGINS_POD_GROUP_API, names.POD_GROUP_KIND)


def group_of(pod: Mapping) -> Classification | None:
    return named_by(pod, "label", names.PLUGINS_POD_GROUP_LABEL, names.SOURCE_PLUGINS_POD_GROUP)


def declaration(pod_group: Mapping) -> Declaration:
    return {"sizes": {"": int((pod_group.get("spec") or {}).get("minMember") or 0)}}


def declarer(group: str, labels: Mapping[str, str], owner: tuple[str, str] | None) -> ObjectRef:
    """The PodGroup the label names, as written (the group label holds it made a label value)."""
    return labels.get(names.PLUGINS_POD_GROUP_LABEL, group), None


INTEGRATION = Integration(
    sources=(names.SOURCE_PLUGINS_POD_GROUP,), group_of=group_of, resource=RESOURCE, declaration=declaration,
    verbs=LIST_AND_WATCH, declarer=declarer, kept_labels=(names.PLUGINS_POD_GROUP_LABEL,),
    names_group=(("labels", names.PLUGINS_POD_GROUP_LABEL),),
)
