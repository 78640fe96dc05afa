"""The objects that ask an autoscaler for a group's capacity, built from its members' shapes
(docs/design.md, "Autoscaled clusters"): a PodTemplate per distinct shape and one
ProvisioningRequest counting them, or one placeholder pod per member.

A shape is what decides where a member may run and what it takes there, as the autoscaler's own
simulation reads it: its requests (as the scheduler counts them), its node selector, required
node affinity and tolerations, and the claims it makes from templates (each pod gets its own).
Every object is labelled with the uid of the group's Gang and the attempt it belongs to, and
owned by the Gang, so that it goes with the group.
"""

import hashlib
from collections.abc import Iterable, Mapping, Sequence

from gangkeeper import names
from gangkeeper.controller.model.members import Member
from gangkeeper.controller.model.nodes import Toleration
from gangkeeper.controller.model.objects import Workload
from gangkeeper.controller.model.selectors import Requirement, Term
from gangkeeper.quantity import format_quantity

# Resources a container may request without a limit; any other (extended resources, hugepages)
# must be limited to what it requests.
_REQUEST_ONLY = frozenset({"cpu", "memory", "ephemeral-storage"})
_MAX_NAME = 253
PAUSE = "pause"  # the placeholder's container


def shapes(members: Iterable[Member]) -> list[tuple[Member, int]]:
    """The distinct shapes among `members`, each as its first member and how many share it, in the members' order."""
    counted: dict[tuple, list] = {}
    for member in members:
        key = (tuple(sorted(member.requests.items())), member.placement_key,
               tuple(claim.template for claim in member.claims if claim.template))
        entry = counted.setdefault(key, [member, 0])
        entry[1] += 1
    return [(member, count) for member, count in counted.values()]


def object_name(gang: Workload, attempt: int, *parts: object) -> str:
    """`gangkeeper-<gang>-<attempt>[-<part>…]`, shortened with a hash of the whole when longer than a name may be."""
    name = "-".join(str(part) for part in ("gangkeeper", gang.name, attempt, *parts))
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    return f"{name[:_MAX_NAME - len(digest) - 1].rstrip('-.')}-{digest}"


def pod_template(gang: Workload, attempt: int, index: int, member: Member) -> dict:
    return {"apiVersion": "v1", "kind": "PodTemplate",
            "metadata": _metadata(gang, attempt, object_name(gang, attempt, index)),
            "template": {"metadata": {"labels": _labels(gang, attempt)}, "spec": pod_spec(member)}}


def provisioning_request(gang: Workload, attempt: int, provisioning_class: str,
                         templates: Sequence[tuple[str, int]]) -> dict:
    """A request for every pod of `templates` (name, count) at once, of `provisioning_class`."""
    group, version, _ = names.PROVISIONING_REQUEST_API
    return {"apiVersion": f"{group}/{version}", "kind": names.PROVISIONING_REQUEST_KIND,
            "metadata": _metadata(gang, attempt, object_name(gang, attempt)),
            "spec": {"provisioningClassName": provisioning_class,
                     "podSets": [{"podTemplateRef": {"name": name}, "count": count} for name, count in templates]}}


def placeholder(gang: Workload, attempt: int, index: int, member: Member) -> dict:
    """An ungated pause pod in the member's shape, of the placeholders' PriorityClass: any real pod
    preempts it, it preempts nothing, and it takes no time to go."""
    spec = pod_spec(member)
    spec.update(priorityClassName=names.PLACEHOLDER_PRIORITY_CLASS, terminationGracePeriodSeconds=0,
                restartPolicy="Always", automountServiceAccountToken=False, enableServiceLinks=False)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": _metadata(gang, attempt, object_name(gang, attempt, index)), "spec": spec}


def pod_spec(member: Member) -> dict:
    """The member's shape as a pod spec of one pause container, running as nobody."""
    requests = {name: format_quantity(value) for name, value in sorted(member.requests.items())
                if name != "pods" and value > 0}
    limits = {name: value for name, value in requests.items() if name not in _REQUEST_ONLY}
    container: dict = {"name": PAUSE, "image": names.PLACEHOLDER_IMAGE,
                       "resources": {"requests": requests, **({"limits": limits} if limits else {})},
                       "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                           "runAsNonRoot": True, "runAsUser": 65535,
                                           "capabilities": {"drop": ["ALL"]}}}
    spec: dict = {"containers": [container],
                  "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}}
    if member.node_selector:
        spec["nodeSelector"] = dict(member.node_selector)
    if member.affinity_terms is not None:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [_term(term) for term in member.affinity_terms]}}}
    if member.tolerations:
        spec["tolerations"] = [_toleration(toleration) for toleration in member.tolerations]
    claims = [{"name": claim.name, "resourceClaimTemplateName": claim.template}
              for claim in member.claims if claim.template]
    if claims:
        spec["resourceClaims"] = claims
    return spec


def _metadata(gang: Workload, attempt: int, name: str) -> dict:
    return {"name": name, "namespace": gang.namespace, "labels": _labels(gang, attempt),
            "ownerReferences": [{"apiVersion": gang.api_version, "kind": gang.kind, "name": gang.name,
                                 "uid": gang.uid, "controller": True}]}


def _labels(gang: Workload, attempt: int) -> dict[str, str]:
    return {names.CAPACITY_FOR_LABEL: gang.uid, names.CAPACITY_ATTEMPT_LABEL: str(attempt),
            names.MANAGED_BY_LABEL: names.MANAGED_BY_VALUE}


def _term(term: Term) -> dict:
    written: dict = {}
    if term.match_expressions:
        written["matchExpressions"] = [_requirement(r) for r in term.match_expressions]
    if term.match_fields:
        written["matchFields"] = [_requirement(r) for r in term.match_fields]
    return written


def _requirement(requirement: Requirement) -> Mapping:
    written: dict = {"key": requirement.key, "operator": requirement.operator}
    if requirement.values:
        written["values"] = list(requirement.values)
    return written


def _toleration(toleration: Toleration) -> Mapping:
    written = {"key": toleration.key, "operator": toleration.operator, "value": toleration.value,
               "effect": toleration.effect}
    return {field: value for field, value in written.items() if value}
