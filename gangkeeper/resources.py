"""What a pod asks of a node, counted the way the kube-scheduler counts it.

`pod_requests` follows the scheduler's `PodRequests` (k8s.io/component-helpers resource):
app containers and sidecars (init containers with `restartPolicy: Always`) run together, each
ordinary init container runs alone beside the sidecars started before it, the pod needs the
larger of the two, plus `spec.overhead`. A container without a request for a resource it has
a limit for requests the limit (the API server's defaulting). Pod-level `spec.resources`
(alpha in 1.32) is not modelled.
"""

import math
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from fractions import Fraction
from functools import lru_cache

from gangkeeper.names import DEFAULT_ACCELERATORS
from gangkeeper.quantity import parse_quantity

Resources = dict[str, Fraction]
# An exact amount where whole ones may be ints, as the controller's ledger keeps them: an int is
# equal to its Fraction, and compares and adds exactly with Fractions.
Amount = Fraction | int

PODS = "pods"
CPU = "cpu"
# The amount of a resource not asked for, made once: a Fraction made for every lookup
# (`dict.get(name, Fraction(0))`) added some 40% to each addition it fed.
_NONE = Fraction(0)


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


def as_scheduled(amounts: Mapping[str, Fraction]) -> Resources:
    """Amounts as NodeResourcesFit counts them: cpu in whole millicores and every other resource
    in whole units, rounded up (`Quantity.MilliValue`, `Quantity.Value`), one pod's requests or
    one node's allocatable at a time: two pods asking for 0.4m of cpu take 1m each."""
    return {name: (Fraction(math.ceil(value * 1000), 1000) if name == CPU else Fraction(math.ceil(value)))
            if value.denominator != 1 else value for name, value in amounts.items()}


def is_accelerator(resource: str, patterns: Iterable[str] = DEFAULT_ACCELERATORS) -> bool:
    """Whether an extended resource is an accelerator (`gpu.intel.com/*` style patterns)."""
    return _matches(resource, tuple(patterns))


@lru_cache(maxsize=4096)  # a pass asks for every member; names and pattern sets are few, but come from users
def _matches(resource: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(resource, pattern) for pattern in patterns)


def accelerators(requests: Mapping[str, Fraction], patterns: Iterable[str] = DEFAULT_ACCELERATORS) -> Resources:
    """The accelerator part of a set of requests."""
    patterns = tuple(patterns)
    return {name: value for name, value in requests.items() if value and _matches(name, patterns)}


def accelerator_count(requests: Iterable[Mapping[str, Fraction]], patterns: Iterable[str] = DEFAULT_ACCELERATORS) -> int:
    """The whole accelerators that many sets of requests ask for together: what their exact sum
    comes to, cut to a whole number as a status shows it.

    The members of a workload share one requests mapping (`controller.reading.pods`), and a pass counts
    the members of every group: each distinct mapping is looked at once and counted as often as
    it comes (kept meanwhile, so that no id is reused). Whole amounts are added as integers, the
    rest as Fractions: a Fraction's arithmetic costs far more than an int's."""
    patterns = tuple(patterns)
    seen: dict[int, list] = {}
    for each in requests:
        entry = seen.get(id(each))
        if entry is None:
            seen[id(each)] = [each, 1]
        else:
            entry[1] += 1
    whole, rest = 0, _NONE
    for each, times in seen.values():
        for name, value in each.items():
            if not value or not _matches(name, patterns):
                continue
            if type(value) is int or (type(value) is Fraction and value.denominator == 1):
                whole += value.numerator * times
            else:
                rest += value * times
    return int(whole + rest) if rest else whole


def add(a: Mapping[str, Fraction], b: Mapping[str, Fraction]) -> Resources:
    result = dict(a)
    add_into(result, b)
    return result


def subtract(a: Mapping[str, Amount], b: Mapping[str, Amount]) -> dict[str, Amount]:
    result = dict(a)
    for name, value in b.items():
        result[name] = result.get(name, _NONE) - value
    return result


def add_into(target: Resources, other: Mapping[str, Amount]) -> None:
    for name, value in other.items():
        held = target.get(name)
        if held is not None:
            target[name] = held + value
        elif type(value) is Fraction:  # nothing held yet: the sum is the value itself
            target[name] = value
        else:
            target[name] = _NONE + value


def max_into(target: Resources, other: Mapping[str, Fraction]) -> None:
    for name, value in other.items():
        if value > target.get(name, _NONE):
            target[name] = value


def shortfall(requests: Mapping[str, Fraction], free: Mapping[str, Fraction]) -> Resources:
    """Per resource, how much more than `free` the requests need (empty when they fit)."""
    missing: Resources = {}
    for name, value in requests.items():
        have = free.get(name, _NONE)
        if value > have:
            missing[name] = value - have
    return missing
