"""Which group a pod belongs to, decided from the pod alone (docs/design.md, "Group identity").

The webhook calls `classify` on every pod CREATE; it reads labels, annotations,
ownerReferences and the pod's own requests, never the API, so it stays fast and needs no
credentials. Sizes (minCount) are not decided here: the controller resolves them from the
owner objects.

The rules are the workload kinds' own (gangkeeper.integrations, one module per kind), asked in
their order, first match wins. What no single kind decides stays here: which pods are left
alone, and how an explicit group label and the group a kind finds combine. The finding's types
and the label-value helpers are the integrations', and are imported from here too.
"""

from collections.abc import Iterable, Mapping

from gangkeeper import integrations, names
from gangkeeper.integrations import plain_pods
from gangkeeper.integrations.finding import (
    LABEL_VALUE_RULE,
    Classification,
    GroupIdentity,
    is_valid_label_value,
    to_label_value,
)

__all__ = ["LABEL_VALUE_RULE", "Classification", "GroupIdentity", "classify", "is_valid_label_value",
           "leave_alone_reason", "placeholder_for", "to_label_value"]


def placeholder_for(pod: Mapping) -> str | None:
    """The uid of the Gang whose group a placeholder pod holds capacity for, or None when the pod is
    no placeholder.

    The controller creates placeholders ungated on purpose, so that an autoscaler sees them pending
    and adds nodes for a waiting group: the label makes a pod one, whatever else it carries."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    found = labels.get(names.CAPACITY_FOR_LABEL)
    return None if found is None else str(found)


def leave_alone_reason(pod: Mapping, namespace: str, excluded_namespaces: Iterable[str]) -> str | None:
    """Why gangkeeper must not gate this pod at all, or None when it may."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    labels = metadata.get("labels") or {}
    placeholder = placeholder_for(pod)
    if placeholder is not None:
        return (f"a placeholder holding capacity for the group of Gang {placeholder} (label "
                f"{names.CAPACITY_FOR_LABEL}): never a member")
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
    """The group of a pod being created, first match wins (docs/design.md order).

    The source of an explicit label is what the rules say when they give the same name, else
    `explicit`: the source is never taken from what the pod claims, so a pod cannot pass for a
    member of a job it does not belong to. `fallback_name` names a lone pod that has no name yet
    (created with `generateName`: the API server calls admission before it picks the name).
    """
    reason = leave_alone_reason(pod, namespace, excluded_namespaces)
    if reason:
        return Classification(None, reason)
    derived = _derived(pod, accelerator_patterns, fallback_name)
    explicit = plain_pods.explicit_group(pod)
    if (explicit is None or explicit.identity is None or derived.identity is None
            or derived.identity.name != explicit.identity.name):
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
    """The group the rules after the explicit label give: each kind's in turn, then a lone pod."""
    for rule in integrations.RULES:
        found = rule(pod)
        if found is not None:
            return found
    return plain_pods.lone_pod(pod, accelerator_patterns, fallback_name)
