"""A pod's rules as its spec writes them, read into `model.rules.PodRules`: its required pod
affinity and anti-affinity terms, its topology spread constraints and its host ports.

A pod holds the host ports of its app containers and of its sidecars (init containers with
`restartPolicy: Always`, which run as long as the pod): the scheduler's `GetHostPorts`. Ordinary
init containers have finished before the app containers start, so their ports are not held.
"""

from collections.abc import Hashable, Mapping
from functools import lru_cache
from typing import TypeVar

from gangkeeper.controller.model.rules import (
    DEFAULT_PROTOCOL,
    DO_NOT_SCHEDULE,
    HONOR,
    IGNORE,
    NO_RULES,
    WILDCARD_IP,
    HostPort,
    PodRules,
    PodTerm,
    SpreadConstraint,
)
from gangkeeper.controller.model.selectors import Requirement
from gangkeeper.controller.reading.selectors import selector_from_api

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
# lru_cache hides the type from mypy: a call of `_shared` is Any, though it is the argument's type.
Shared = TypeVar("Shared", bound=Hashable)


def rules_of(pod: Mapping) -> PodRules:
    """A pod's rules from the raw API object; equal rules are one shared object."""
    spec = pod.get("spec") or {}
    affinity = spec.get("affinity") or {}
    terms = (affinity.get("podAffinity") or {}).get(REQUIRED) or ()
    anti_terms = (affinity.get("podAntiAffinity") or {}).get(REQUIRED) or ()
    constraints = spec.get("topologySpreadConstraints") or ()
    ports = host_ports(pod)
    if not (terms or anti_terms or constraints or ports):
        return NO_RULES
    metadata = pod.get("metadata") or {}
    namespace, labels = metadata.get("namespace", ""), metadata.get("labels") or {}
    return _shared(PodRules(
        affinity=tuple(term_from_api(t, namespace, labels) for t in terms),
        anti_affinity=tuple(term_from_api(t, namespace, labels) for t in anti_terms),
        spread=tuple(constraint_from_api(c, labels) for c in constraints),
        host_ports=ports,
    ))


def term_from_api(raw: Mapping, namespace: str, labels: Mapping[str, str]) -> PodTerm:
    selector = selector_from_api(raw.get("labelSelector")).merged(
        [Requirement(key, "In", (labels[key],)) for key in raw.get("matchLabelKeys") or () if key in labels]
        + [Requirement(key, "NotIn", (labels[key],)) for key in raw.get("mismatchLabelKeys") or () if key in labels])
    namespace_selector = raw.get("namespaceSelector")
    named = raw.get("namespaces") or ()
    namespaces = frozenset(named) if named or namespace_selector is not None else frozenset((namespace,))
    return PodTerm(selector, namespaces, selector_from_api(namespace_selector), raw.get("topologyKey", ""))


def constraint_from_api(raw: Mapping, labels: Mapping[str, str]) -> SpreadConstraint:
    selector = selector_from_api(raw.get("labelSelector")).merged(
        Requirement(key, "In", (labels[key],)) for key in raw.get("matchLabelKeys") or () if key in labels)
    return SpreadConstraint(
        max_skew=int(raw.get("maxSkew") or 0),
        topology_key=raw.get("topologyKey", ""),
        when_unsatisfiable=raw.get("whenUnsatisfiable") or DO_NOT_SCHEDULE,
        selector=selector,
        min_domains=int(raw.get("minDomains") or 1),
        node_affinity_policy=raw.get("nodeAffinityPolicy") or HONOR,
        node_taints_policy=raw.get("nodeTaintsPolicy") or IGNORE,
    )


def host_ports(pod: Mapping) -> tuple[HostPort, ...]:
    """The host ports a pod holds on its node, sorted and without repeats."""
    spec = pod.get("spec") or {}
    containers = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    containers += spec.get("containers") or ()
    found = {HostPort(port.get("hostIP") or WILDCARD_IP, port.get("protocol") or DEFAULT_PROTOCOL,
                      int(port["hostPort"]))
             for container in containers for port in container.get("ports") or ()
             if int(port.get("hostPort") or 0) > 0}
    return tuple(sorted(found))


@lru_cache(maxsize=4096)
def _shared(value: Shared) -> Shared:
    """The first equal value seen: a group's members share their rules."""
    return value
