"""What a pod asks of a node, counted the way the kube-scheduler counts it.

`pod_requests` follows the scheduler's `PodRequests` (k8s.io/component-helpers resource):
app containers and sidecars (init containers with `restartPolicy: Always`) run together, each
ordinary init container runs alone beside the sidecars started before it, the pod needs the
larger of the two, plus `spec.overhead`. A container without a request for a resource it has
a limit for requests the limit (the API server's defaulting). Pod-level `spec.resources`
(alpha in 1.32) is not modelled.
"""

from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from fractions import Fraction
from functools import lru_cache

from gangkeeper.names import DEFAULT_ACCELERATORS
from gangkeeper.quantity import parse_quantity

Resources = dict[str, Fraction]

PODS = "pods"


def container_requests(container: Mapping) -> Resources:
    """The container's requests, defaulted from its limits where a request is missing."""
    resources = container.get("resources") or {}
    merged = dict(resources.get("limits") or {})
    merged.update(resources.get("requests") or {})
    return {name: parse_quantity(value) for name, value in merged.items()}


def pod_requests(pod: Mapping) -> Resources:
    """Requests of the whole pod per resource name (not counting the pod slot itself)."""
    spec = pod.get("spec") or {}
    total: Resources = {}
    for container in spec.get("containers") or ():
        add_into(total, container_requests(container))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for container in spec.get("initContainers") or ():
        requests = container_requests(container)
        if container.get("restartPolicy") == "Always":
            add_into(total, requests)
            add_into(sidecars, requests)
            step = dict(sidecars)
        else:
            step = add(requests, sidecars)
        max_into(init_peak, step)
    max_into(total, init_peak)
    add_into(total, {name: parse_quantity(v) for name, v in (spec.get("overhead") or {}).items()})
    return {name: value for name, value in total.items() if value}


def is_accelerator(resource: str, patterns: Iterable[str] = DEFAULT_ACCELERATORS) -> bool:
    """Whether an extended resource is an accelerator (`gpu.intel.com/*` style patterns)."""
    return _matches(resource, tuple(patterns))


@lru_cache(maxsize=4096)  # a pass asks for every member; names and pattern sets are few, but come from users
def _matches(resource: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(resource, pattern) for pattern in patterns)


def accelerators(requests: Mapping[str, Fraction], patterns: Iterable[str] = DEFAULT_ACCELERATORS) -> Resources:
    """The accelerator part of a set of requests."""
    patterns = tuple(patterns)
    return {name: value for name, value in requests.items() if value and is_accelerator(name, patterns)}


def add(a: Mapping[str, Fraction], b: Mapping[str, Fraction]) -> Resources:
    result = dict(a)
    add_into(result, b)
    return result


def subtract(a: Mapping[str, Fraction], b: Mapping[str, Fraction]) -> Resources:
    result = dict(a)
    for name, value in b.items():
        result[name] = result.get(name, Fraction(0)) - value
    return result


def add_into(target: Resources, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        target[name] = target.get(name, Fraction(0)) + value


def max_into(target: Resources, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        if value > target.get(name, Fraction(0)):
            target[name] = value


def shortfall(requests: Mapping[str, Fraction], free: Mapping[str, Fraction]) -> Resources:
    """Per resource, how much more than `free` the requests need (empty when they fit)."""
    return {
        name: value - free.get(name, Fraction(0))
        for name, value in requests.items()
        if value > free.get(name, Fraction(0))
    }
