"""/mutate policy: which pods become gated members of a group, and the patch that makes them so.

Pure: an AdmissionRequest in, a Mutation out. The gate is added on CREATE only (the API server
refuses new gates afterwards), and a dry-run gets the same answer as a real request (the API
server discards the result itself).
"""

from dataclasses import dataclass, field

from gangkeeper.identity import classify, placeholder_for
from gangkeeper.webhook.patch import gate_and_label
from gangkeeper.webhook.policy import Policy
from gangkeeper.webhook.review import AdmissionRequest

PATCHED, ALLOWED = "patched", "allowed"
# Characters of the request uid that make a lone generateName pod's group unique.
_UID_CHARS = 8


@dataclass(frozen=True)
class Mutation:
    decision: str
    reason: str
    ops: list[dict] = field(default_factory=list)
    group: str = ""
    source: str = ""
    unexpected: bool = False


def mutate(request: AdmissionRequest, policy: Policy) -> Mutation:
    if request.kind != "Pod" or request.group != "":
        return Mutation(ALLOWED, f"not a pod: {request.kind} (the webhook configuration should not send it)",
                        unexpected=True)
    if request.operation != "CREATE":
        return Mutation(ALLOWED, f"{request.operation}: gates are added at creation only")
    pod = request.object or {}
    classification = classify(pod, namespace=request.namespace,
                              excluded_namespaces=policy.excluded_namespaces,
                              accelerator_patterns=policy.accelerator_patterns,
                              fallback_name=fallback_name(request))
    identity = classification.identity
    if identity is None:
        # A placeholder's line in the audit log names the group it holds capacity for.
        return Mutation(ALLOWED, classification.reason, group=placeholder_for(pod) or "")
    ops = gate_and_label(pod, identity)
    decision = PATCHED if ops else ALLOWED
    reason = classification.reason if ops else f"{classification.reason}; already gated and labelled"
    return Mutation(decision, reason, ops, identity.name, identity.source)


def fallback_name(request: AdmissionRequest) -> str:
    """A name for a lone pod created with `generateName`: the API server picks the real name
    after admission, so two such pods would otherwise share the group `gen-`."""
    metadata = (request.object or {}).get("metadata") or {}
    generate_name = metadata.get("generateName") or ""
    if metadata.get("name") or not generate_name:
        return ""
    return generate_name + request.uid[:_UID_CHARS]
