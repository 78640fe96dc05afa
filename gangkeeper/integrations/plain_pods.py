"""Plain pods: a group its members declare with the group label, or a lone accelerator pod
(docs/design.md, "Group identity", rules 1 and 10).

The explicit label `gangkeeper.io/group` is asked first and a lone accelerator pod last, around
the other kinds; how the explicit label and another kind's finding combine is decided in
gangkeeper.identity. An explicit group's size is its members' `gangkeeper.io/min-count` or a
Gang's; a lone pod is a group of one. Plain pods have no owner object: the controller watches
nothing for them and there is nothing to suspend.
"""

from collections.abc import Iterable, Mapping

from gangkeeper import names
from gangkeeper.integrations.finding import Classification, GroupIdentity, found, labels_and_annotations
from gangkeeper.integrations.kind import Integration
from gangkeeper.resources import accelerators, pod_requests


def explicit_group(pod: Mapping) -> Classification | None:
    labels, _ = labels_and_annotations(pod)
    if names.GROUP_LABEL not in labels:
        return None
    # Kept as written: a bad value is refused by /validate with a message, not silently renamed.
    return Classification(GroupIdentity(str(labels[names.GROUP_LABEL]), names.SOURCE_EXPLICIT),
                          f"label {names.GROUP_LABEL}")


def lone_pod(pod: Mapping, patterns: Iterable[str], fallback_name: str) -> Classification:
    """A group of one for a pod that requests an accelerator; else why the pod is left alone.

    `fallback_name` names a pod that has no name yet (created with `generateName`: the API
    server calls admission before it picks the name).
    """
    try:
        wanted = accelerators(pod_requests(pod), patterns)
    except ValueError as error:
        return Classification(None, f"requests could not be read ({error}); the API server will refuse the pod")
    if not wanted:
        return Classification(None, "not a training pod: no group label, no training owner, no accelerator request")
    metadata = pod.get("metadata") or {}
    name = metadata.get("name") or fallback_name or metadata.get("generateName") or "pod"
    resources = ", ".join(sorted(wanted))
    return found(name, names.SOURCE_ACCELERATOR_POD, f"lone pod requesting {resources}")


INTEGRATION = Integration(sources=(names.SOURCE_EXPLICIT, names.SOURCE_ACCELERATOR_POD),
                          names_group=(("labels", names.GROUP_LABEL),))
