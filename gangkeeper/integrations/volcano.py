"""Volcano's PodGroup, `scheduling.volcano.sh/v1beta1` (docs/design.md, "Group identity", rule 3).

Pods annotated `scheduling.k8s.io/group-name` (Volcano's KubeGroupNameAnnotationKey) form the
group of that name, sized by the PodGroup's `spec.minMember`. Asked after scheduler-plugins'
label: a pod carrying both is that PodGroup's. It has no suspend switch.
"""

from collections.abc import Mapping

from gangkeeper import names
from gangkeeper.integrations.finding import Classification, named_by
from gangkeeper.integrations.kind import LIST_AND_WATCH, Declaration, Integration, ObjectRef, Resource

RESOURCE = Resource(*names.VOLCANO_POD_GROUP_API, names.POD_GROUP_KIND)


def group_of(pod: Mapping) -> Classification | None:
    return named_by(pod, "annotation", names.VOLCANO_GROUP_ANNOTATION, names.SOURCE_VOLCANO_POD_GROUP)


def declaration(pod_group: Mapping) -> Declaration:
    return {"sizes": {"": int((pod_group.get("spec") or {}).get("minMember") or 0)}}


def declarer(group: str, labels: Mapping[str, str], owner: tuple[str, str] | None) -> ObjectRef:
    """The PodGroup named like the group: the annotation naming it is not kept on the member."""
    return group, None


INTEGRATION = Integration(
    sources=(names.SOURCE_VOLCANO_POD_GROUP,), group_of=group_of, resource=RESOURCE, declaration=declaration,
    verbs=LIST_AND_WATCH, declarer=declarer, names_group=(("annotations", names.VOLCANO_GROUP_ANNOTATION),),
)
