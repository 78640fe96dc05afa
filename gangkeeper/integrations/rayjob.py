"""KubeRay RayJob (ray.io/v1): the switch of its RayCluster's gang, and a submitter that is no
part of any gang.

A RayJob creates a RayCluster it owns and, in `K8sJobMode` (the default), a submitter Job named
after it whose one CPU pod runs `ray job submit` against the cluster. The RayJob controller
creates that Job only once the cluster is ready: a gang holding it would wait for nothing, and
the Job rule, which groups every Job's pods, would gate it as a group of one. So the webhook
leaves it alone, asked before the Job rule. It is known by what KubeRay puts on the submitter's
pod template, whether the user gave the template or not: `ray.io/originated-from-crd: RayJob`,
and no `ray.io/node-type`, which every pod of the cluster carries (a RayJob's cluster carries the
originated-from labels too), and the Job's own label (a RayJob's submitter is a Job's pod).

`spec.suspend` makes the RayJob controller delete its RayCluster and submitter, and create them
anew when cleared: the switch of its cluster's gang (`switch_of`). KubeRay refuses it on a RayJob
that keeps its cluster after it finishes (`shutdownAfterJobFinishes: false`, the default) or
runs on a cluster it selects: such a RayJob fails validation for good (ValidationFailed). So the
switch is offered only on a RayJob that may be suspended; for any other, the controller has none
and deletes the group's pods loudly, which the RayCluster controller creates again, gated.
"""

from collections.abc import Mapping

from gangkeeper import names
from gangkeeper.integrations.finding import Classification, labels_and_annotations
from gangkeeper.integrations.kind import SUSPEND_VERBS, Declaration, Integration, Resource, Suspension

RESOURCE = Resource(*names.RAYJOB_API, names.RAYJOB_KIND)
SUSPENSION = Suspension(("spec", "suspend"))


def group_of(pod: Mapping) -> Classification | None:
    labels, _ = labels_and_annotations(pod)
    if (labels.get(names.RAY_ORIGINATED_FROM_CRD_LABEL) != names.RAYJOB_KIND or names.RAY_NODE_TYPE_LABEL in labels
            or not labels.get(names.JOB_NAME_LABEL)):
        return None
    rayjob = labels.get(names.RAY_ORIGINATED_FROM_NAME_LABEL, "?")
    return Classification(None, f"RayJob {rayjob}'s submitter ({names.RAY_ORIGINATED_FROM_CRD_LABEL}="
                                f"{names.RAYJOB_KIND}): it is created only once the Ray cluster runs")


def switch_of(obj: Mapping) -> tuple[str, str, str] | None:
    """(resource, name, uid) of the RayJob controlling `obj` (its RayCluster), whose switch is the one that sticks."""
    for owner in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if (isinstance(owner, Mapping) and owner.get("controller") and owner.get("kind") == names.RAYJOB_KIND
                and str(owner.get("apiVersion", "")).startswith(f"{RESOURCE.group}/") and owner.get("uid")):
            return RESOURCE.name, str(owner.get("name", "")), str(owner["uid"])
    return None


def suspendable(spec: Mapping) -> bool:
    """Whether KubeRay accepts `suspend: true` on a RayJob of this spec (utils/validation.go)."""
    return spec.get("shutdownAfterJobFinishes") is True and not spec.get("clusterSelector")


def declaration(job: Mapping) -> Declaration:
    """A RayJob declares no group of its own (its RayCluster does): it is read for its switch, when it may be used."""
    if not suspendable(job.get("spec") or {}):
        return {"sizes": {}}
    return {"sizes": {}, "suspend": SUSPENSION.state(job)}


INTEGRATION = Integration(sources=(), group_of=group_of, resource=RESOURCE, declaration=declaration,
                          verbs=SUSPEND_VERBS, suspension=SUSPENSION)
