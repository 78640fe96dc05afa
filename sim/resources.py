"""What a pod asks of a node, counted as the kube-scheduler counts it.

`pod_requests` is `PodRequests` (k8s.io/component-helpers/resource), written here from its
definition rather than borrowed from gangkeeper, so that the emulation checks gangkeeper's
count instead of repeating it. Containers and sidecars (init containers with `restartPolicy:
Always`) run side by side for the pod's life; each other init container runs alone, beside only
the sidecars started before it. The pod needs the larger of the two, resource by resource, and
then `spec.overhead` on top. Only requests count: the API server has already copied a limit
into a missing request. Pod-level `spec.resources` (the PodLevelResources feature) is not
modelled (nor by gangkeeper: docs/limits.md); `accelerators` reads gangkeeper's list of
accelerator names, which is vocabulary, not a decision.

`scheduled_requests` is what NodeResourcesFit holds against a node: those amounts rounded up to
whole millicores of cpu and whole units of the rest (`sim.quantity.counted`), pod by pod.
"""

from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from fractions import Fraction

from gangkeeper.names import DEFAULT_ACCELERATORS
from sim.quantity import counted, parse_quantity

Resources = dict[str, Fraction]

SIDECAR_RESTART_POLICY = "Always"


def container_requests(container: Mapping) -> Resources:
    """A container's `resources.requests`, parsed."""
    requests = (container.get("resources") or {}).get("requests") or {}
    return {name: parse_quantity(value) for name, value in requests.items()}


def pod_requests(pod: Mapping) -> Resources:
    """The pod's requests per resource (the pod slot itself is not among them)."""
    spec = pod.get("spec") or {}
    running: Resources = {}
    for container in spec.get("containers") or ():
        _add(running, container_requests(container))
    sidecars: Resources = {}
    starting: Resources = {}  # the most any one step of the init sequence needs
    for container in spec.get("initContainers") or ():
        requests = container_requests(container)
        if container.get("restartPolicy") == SIDECAR_RESTART_POLICY:
            _add(running, requests)
            _add(sidecars, requests)
            step = dict(sidecars)
        else:
            step = dict(sidecars)
            _add(step, requests)
        for name, amount in step.items():
            starting[name] = max(starting.get(name, Fraction(0)), amount)
    total = dict(running)
    for name, amount in starting.items():
        total[name] = max(total.get(name, Fraction(0)), amount)
    _add(total, {name: parse_quantity(value) for name, value in (spec.get("overhead") or {}).items()})
    return total


def scheduled_requests(pod: Mapping) -> Resources:
    """The pod's requests in the whole millicores and units the scheduler holds on its node."""
    return {name: counted(name, amount) for name, amount in pod_requests(pod).items()}


def scheduled_amounts(amounts: Mapping[str, object]) -> Resources:
    """A node's allocatable (or any list of quantities) in the scheduler's whole numbers."""
    return {name: counted(name, parse_quantity(value)) for name, value in amounts.items()}


def accelerators(requests: Mapping[str, Fraction], patterns: Iterable[str] = DEFAULT_ACCELERATORS) -> Resources:
    """The requests for accelerators: resources named by one of `patterns` (`gpu.intel.com/*`)."""
    patterns = tuple(patterns)
    return {name: amount for name, amount in requests.items()
            if amount and any(fnmatchcase(name, pattern) for pattern in patterns)}


def _add(into: Resources, other: Mapping[str, Fraction]) -> None:
    for name, amount in other.items():
        into[name] = into.get(name, Fraction(0)) + amount
