"""Which group a pod belongs to, decided from the pod alone (DESIGN.md, "Group identity").

The webhook calls `classify` on every pod CREATE; it reads labels, annotations,
ownerReferences and the pod's own requests, never the API, so it stays fast and needs no
credentials. Sizes (minCount) are not decided here: the controller resolves them from the
owner objects.

Group names are label values (at most 63 characters). Derived names carry the owner's UID so
that two jobs of the same name, one deleted and one re-created, never share a group; a name
that would be too long is shortened deterministically with a hash of the whole name.
"""

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gangkeeper import names
from gangkeeper.resources import accelerators, pod_requests

LABEL_VALUE_MAX = 63
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_HASH_CHARS = 10
LABEL_VALUE_RULE = (
    "at most 63 characters: letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
)


@dataclass(frozen=True)
class GroupIdentity:
    """A pod's group: the value of the group label, and how it was found."""

    name: str
    source: str


@dataclass(frozen=True)
class Classification:
    """The webhook's view of one pod: its group, or why gangkeeper leaves it alone."""

    identity: GroupIdentity | None
    reason: str

    @property
    def is_member(self) -> bool:
        return self.identity is not None


def is_valid_label_value(value: object) -> bool:
    return isinstance(value, str) and len(value) <= LABEL_VALUE_MAX and bool(_LABEL_VALUE.match(value))


def to_label_value(text: str) -> str:
    """`text` as a valid label value; unchanged when it already is one.

    A name that is too long or has characters a label value may not hold keeps a readable
    prefix and gets `-` plus a hash of the whole text, so two different names never meet.
    """
    if is_valid_label_value(text) and text:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:_HASH_CHARS]
    readable = re.sub(r"[^-A-Za-z0-9_.]", "-", text)[: LABEL_VALUE_MAX - _HASH_CHARS - 1]
    readable = readable.strip("-_.")
    readable = re.sub(r"^[^A-Za-z0-9]+", "", readable)
    return f"{readable}-{digest}" if readable else digest


def leave_alone_reason(pod: Mapping, namespace: str, excluded_namespaces: Iterable[str]) -> str | None:
    """Why gangkeeper must not gate this pod at all, or None when it may."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    labels = metadata.get("labels") or {}
    if namespace in set(excluded_namespaces) | names.NEVER_ENFORCED_NAMESPACES:
        return f"namespace {namespace} is never enforced"
    if spec.get("nodeName"):
        return "already bound to a node (spec.nodeName is set; the API refuses gates on bound pods)"
    if spec.get("schedulingGroup"):
        return "member of a native gang (spec.schedulingGroup is set): the scheduler's own gang owns it"
    if labels.get(names.KUEUE_MANAGED_LABEL) == "true" or names.KUEUE_QUEUE_NAME_LABEL in labels:
        return "managed by Kueue"
    gates = spec.get("schedulingGates") or ()
    if any(str(gate.get("name", "")).startswith(names.KUEUE_PREFIX) for gate in gates if isinstance(gate, dict)):
        return "gated by Kueue"
    return None


def classify(pod: Mapping, *, namespace: str, excluded_namespaces: Iterable[str] = (),
             accelerator_patterns: Iterable[str] = names.DEFAULT_ACCELERATORS,
             fallback_name: str = "") -> Classification:
    """The group of a pod being created, first match wins (DESIGN.md order).

    The source of an explicit label is what the rules say when they give the same name, else
    `explicit`: the source is never taken from what the pod claims, so a pod cannot pass for a
    member of a job it does not belong to. `fallback_name` names a lone pod that has no name yet
    (created with `generateName`: the API server calls admission before it picks the name).
    """
    reason = leave_alone_reason(pod, namespace, excluded_namespaces)
    if reason:
        return Classification(None, reason)
    derived = _derived(pod, accelerator_patterns, fallback_name)
    explicit = _explicit(pod)
    if explicit is None or derived.identity is None or derived.identity.name != explicit.identity.name:
        return explicit or derived
    if derived.identity.source != names.SOURCE_ACCELERATOR_POD:
        # The label is the one an owner or PodGroup gives (our own from an earlier admission pass,
        # or the user's spelling of it): the group's source is where the rules found it.
        return derived
    # A label equal to the pod's own name: a group of one when the webhook wrote it (an earlier
    # pass says so), else the user's explicit group that happens to share the pod's name.
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return derived if annotations.get(names.GROUP_SOURCE_ANNOTATION) == names.SOURCE_ACCELERATOR_POD else explicit


def _derived(pod: Mapping, accelerator_patterns: Iterable[str], fallback_name: str) -> Classification:
    """The group the rules after the explicit label give (DESIGN.md order, first match wins)."""
    for rule in _RULES:
        found = rule(pod)
        if found is not None:
            return found
    return _accelerator_pod(pod, accelerator_patterns, fallback_name)


def _metadata(pod: Mapping) -> tuple[Mapping, Mapping]:
    metadata = pod.get("metadata") or {}
    return metadata.get("labels") or {}, metadata.get("annotations") or {}


def _controller_owner(pod: Mapping, kind: str) -> Mapping | None:
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(owner, dict) and owner.get("kind") == kind and owner.get("controller"):
            return owner
    return None


def _found(name: str, source: str, how: str) -> Classification:
    return Classification(GroupIdentity(to_label_value(name), source), how)


def _explicit(pod: Mapping) -> Classification | None:
    labels, _ = _metadata(pod)
    if names.GROUP_LABEL not in labels:
        return None
    # Kept as written: a bad value is refused by /validate with a message, not silently renamed.
    return Classification(GroupIdentity(str(labels[names.GROUP_LABEL]), names.SOURCE_EXPLICIT),
                          f"label {names.GROUP_LABEL}")


def _native_pod_group(pod: Mapping) -> Classification | None:
    labels, _ = _metadata(pod)
    if not labels.get(names.NATIVE_POD_GROUP_LABEL):
        return None
    return _found(labels[names.NATIVE_POD_GROUP_LABEL], names.SOURCE_NATIVE_POD_GROUP,
                  f"label {names.NATIVE_POD_GROUP_LABEL}")


def _plugins_or_volcano_pod_group(pod: Mapping) -> Classification | None:
    labels, annotations = _metadata(pod)
    if labels.get(names.PLUGINS_POD_GROUP_LABEL):
        return _found(labels[names.PLUGINS_POD_GROUP_LABEL], names.SOURCE_PLUGINS_POD_GROUP,
                      f"label {names.PLUGINS_POD_GROUP_LABEL}")
    if annotations.get(names.VOLCANO_GROUP_ANNOTATION):
        return _found(annotations[names.VOLCANO_GROUP_ANNOTATION], names.SOURCE_VOLCANO_POD_GROUP,
                      f"annotation {names.VOLCANO_GROUP_ANNOTATION}")
    return None


def _pytorchjob(pod: Mapping) -> Classification | None:
    labels, _ = _metadata(pod)
    owner = _controller_owner(pod, names.PYTORCHJOB_KIND)
    if not labels.get(names.KUBEFLOW_JOB_NAME_LABEL) or owner is None or not owner.get("uid"):
        return None
    return _found(f"{owner['name']}-{owner['uid']}", names.SOURCE_PYTORCHJOB,
                  f"PyTorchJob {owner['name']} (uid {owner['uid']})")


def _jobset(pod: Mapping) -> Classification | None:
    labels, _ = _metadata(pod)
    jobset, uid = labels.get(names.JOBSET_NAME_LABEL), labels.get(names.JOBSET_UID_LABEL)
    if not jobset or not uid:
        return None
    attempt = labels.get(names.JOBSET_RESTART_ATTEMPT_LABEL, "0")
    return _found(f"{jobset}-{uid}-{attempt}", names.SOURCE_JOBSET,
                  f"JobSet {jobset} (uid {uid}), restart attempt {attempt}")


def _job(pod: Mapping) -> Classification | None:
    """Every Job pod is grouped by its Job: the pod cannot tell the Job's parallelism, the
    controller can, and sizes a parallelism-1 Job as a group of one."""
    labels, _ = _metadata(pod)
    owner = _controller_owner(pod, "Job")
    if not labels.get(names.JOB_NAME_LABEL) or owner is None or not owner.get("uid"):
        return None
    return _found(f"{owner['name']}-{owner['uid']}", names.SOURCE_JOB,
                  f"Job {owner['name']} (uid {owner['uid']})")


_RULES = (_native_pod_group, _plugins_or_volcano_pod_group, _pytorchjob, _jobset, _job)


def _accelerator_pod(pod: Mapping, patterns: Iterable[str], fallback_name: str) -> Classification:
    try:
        wanted = accelerators(pod_requests(pod), patterns)
    except ValueError as error:
        return Classification(None, f"requests could not be read ({error}); the API server will refuse the pod")
    if not wanted:
        return Classification(None, "not a training pod: no group label, no training owner, no accelerator request")
    metadata = pod.get("metadata") or {}
    name = metadata.get("name") or fallback_name or metadata.get("generateName") or "pod"
    resources = ", ".join(sorted(wanted))
    return _found(name, names.SOURCE_ACCELERATOR_POD, f"lone pod requesting {resources}")
