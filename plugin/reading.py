"""What the answers read, with the user's own credentials: every object the controller watches,
through the controller's own transforms (`pod_facts`, `node_from_api`, `workload_from_api`,
`cached_object`, `budget_from_api`), once, into what `ClusterIndex.build` takes.

Nodes and the pods of every namespace are what capacity is: without either there is no answer,
and the refusal is said in one line naming the verb and the resource (`Denied`). Anything else
refused (a kind's objects, devices, volumes, budgets, Events) leaves that part out, and the
answer says what was not read (`Cluster.unread`): a namespaced kind is then read in the
namespaces the question is about, where a namespaced Role may allow it. A kind the API does not
serve is read as none, as the controller reads it.
"""

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from gangkeeper import integrations
from gangkeeper.cli import CommandError, one_line
from gangkeeper.controller.cache.index import Change, ClusterIndex
from gangkeeper.controller.model.nodes import Node
from gangkeeper.controller.model.objects import PodFacts, Workload, WorkloadKey
from gangkeeper.controller.reading import kube as api
from gangkeeper.controller.reading import shapes
from gangkeeper.controller.reading.budgets import budget_from_api
from gangkeeper.controller.reading.informer import object_key
from gangkeeper.controller.reading.nodes import node_from_api
from gangkeeper.controller.reading.objects import cached_object
from gangkeeper.controller.reading.pods import pod_facts
from gangkeeper.controller.reading.workloads import workload_from_api
from gangkeeper.integrations.kind import Resource

PRIORITY_CLASSES = Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", namespaced=False)
GANGS = api.GANGS
NEEDED = {api.NODES.name: "the plan needs to read every node",
          api.PODS.name: "the plan needs every pod bound to a node, in every namespace"}


class Denied(CommandError):
    """A read the answer cannot do without was refused: what, and why it is needed."""

    def __init__(self, verb: str, resource: Resource, why: str, namespace: str | None = None):
        where = f" in namespace {namespace}" if namespace else (" in all namespaces" if resource.namespaced else "")
        super().__init__(f"cannot {verb} {resource.name}{where} (forbidden): {why}; ask for get/list on "
                         f"{resource.name}{where}")


@dataclass(frozen=True)
class Cluster:
    """The cluster as read: what `ClusterIndex.build` takes, and what could not be read."""

    nodes: tuple[Node, ...]
    pods: tuple[PodFacts, ...]
    workloads: Mapping[WorkloadKey, Workload]
    objects: tuple[Change, ...]
    unread: tuple[str, ...]

    def index(self, pods: Iterable[PodFacts] = (), workloads: Iterable[Workload] = ()) -> ClusterIndex:
        """The controller's index of it, as after a restart, with `pods` and `workloads` added
        (a workload not yet submitted, as its pods and owners would be)."""
        everything = {**self.workloads, **{(w.resource, w.namespace, w.name): w for w in workloads}}
        return ClusterIndex.build([*self.pods, *pods], everything, self.nodes, objects=self.objects)


def read_cluster(kube: api.Kube, namespaces: Collection[str]) -> Cluster:
    """Every object the controller reads; `namespaces` are those the question is about."""
    unread: list[str] = []

    def read(resource: Resource, transform: Callable[[dict], Any]) -> Callable[[dict], Any]:
        return partial(_readable, resource, transform, unread)

    nodes = _needed(kube, api.NODES, read(api.NODES, node_from_api), shapes.NODES)
    pods = _needed(kube, api.PODS, read(api.PODS, pod_facts), shapes.PODS)
    workloads: dict[WorkloadKey, Workload] = {}
    for resource in integrations.RESOURCES:
        for workload in _wanted(kube, resource, read(resource, partial(workload_from_api, resource.name)), namespaces,
                                unread):
            workloads[(workload.resource, workload.namespace, workload.name)] = workload
    objects: list[Change] = []
    for resource, transform in [*((r, cached_object) for r in api.OCCUPANCY),
                                (api.POD_DISRUPTION_BUDGETS, budget_from_api)]:
        keyed = _wanted(kube, resource, read(resource, partial(_keyed, transform)), namespaces, unread)
        objects += [(resource.name, key, value) for key, value in keyed]
    return Cluster(tuple(nodes), tuple(pods), workloads, tuple(objects), tuple(unread))


def _readable(resource: Resource, transform: Callable[[dict], Any], unread: list[str], obj: dict) -> Any:
    """`transform(obj)`, or None (left out, and said in `unread`) when the controller's reading of
    it fails: as the informers do, one bad object never stops the rest."""
    try:
        return transform(obj)
    except Exception as error:
        unread.append(f"{resource.name} {object_key(obj)} (cannot be read: {one_line(error)})")
        return None


def _keyed(transform: Callable[[dict], Any], obj: dict) -> tuple[str, Any]:
    return object_key(obj), transform(obj)


def _needed(kube: api.Kube, resource: Resource, transform: Callable[[dict], Any],
            reading: shapes.Reading) -> list:
    try:
        items, _ = kube.list(resource, None, transform=transform, reading=reading)
    except api.Forbidden:
        raise Denied("list", resource, NEEDED[resource.name]) from None
    return items


def _wanted(kube: api.Kube, resource: Resource, transform: Callable[[dict], Any], namespaces: Collection[str],
            unread: list[str]) -> list:
    """The resource's objects in every namespace; where that is refused, in `namespaces`; where
    that is refused too, none, and `unread` says so."""
    if not kube.served(resource.group, resource.version, resource.plural):
        return []
    try:
        return kube.list(resource, None, transform=transform)[0]
    except api.Forbidden:
        if not resource.namespaced:
            unread.append(f"{resource.name} (forbidden)")
            return []
    found, refused = [], []
    for namespace in sorted(namespaces):
        try:
            found += kube.list(resource, namespace, transform=transform)[0]
        except api.Forbidden:
            refused.append(namespace)
    read = [namespace for namespace in sorted(namespaces) if namespace not in refused]
    unread.append(f"{resource.name} in all namespaces (forbidden)"
                  + (f"; read in {', '.join(read)} only" if read else ""))
    return found


def read_events(kube: api.Kube, namespace: str, objects: Iterable[tuple[str, str]]) -> tuple[list[dict], str | None]:
    """The Events about each (kind, name) in the namespace; None, or what was refused."""
    events: list[dict] = []
    try:
        for kind, name in objects:
            selector = f"involvedObject.kind={kind},involvedObject.name={name}"
            events += kube.list(api.EVENTS, namespace, field_selector=selector)[0]
    except api.Forbidden:
        return [], f"{api.EVENTS.name} in namespace {namespace} (forbidden)"
    return events, None


def read_gangs(kube: api.Kube, namespaces: Collection[str] | None) -> tuple[list[dict], list[str]]:
    """The Gangs of `namespaces`, or of every namespace the user may read (None), and the
    namespaces skipped (with why). Every namespace: one list, else one per namespace listed."""
    if not kube.served(GANGS.group, GANGS.version, GANGS.plural):
        raise CommandError(f"the API does not serve {GANGS.name} ({GANGS.group}/{GANGS.version}): gangkeeper is not "
                           f"installed on this cluster (kubectl apply -k deploy/default)")
    if namespaces is None:
        try:
            return kube.list(GANGS, None)[0], []
        except api.Forbidden:
            try:
                listed, _ = kube.list(api.NAMESPACES, None)
            except api.Forbidden:
                raise Denied("list", api.NAMESPACES, f"you may not list {GANGS.name} in all namespaces, so each "
                             f"namespace is read apart") from None
            namespaces = [str((item.get("metadata") or {}).get("name", "")) for item in listed]
    gangs: list[dict] = []
    skipped = []
    for namespace in sorted(namespaces):
        try:
            gangs += kube.list(GANGS, namespace)[0]
        except api.Forbidden:
            if len(namespaces) == 1:
                raise Denied("list", GANGS, "top reads the Gangs, where gangkeeper writes each group's state",
                             namespace) from None
            skipped.append(f"{namespace} (cannot list {GANGS.name}: forbidden)")
    return gangs, skipped


def read_priority_classes(kube: api.Kube, named: Collection[str]) -> tuple[dict[str, dict], str | None]:
    """The PriorityClasses by name: every one when they may be listed (the global default is
    among them), else those `named`, each read alone; and what could not be read."""
    try:
        listed, _ = kube.list(PRIORITY_CLASSES, None)
        return {str(c.get("metadata", {}).get("name")): c for c in listed}, None
    except api.Forbidden:
        pass
    found = {}
    for name in sorted(named):
        try:
            found[name] = kube.get(PRIORITY_CLASSES, None, name)
        except api.Forbidden:
            raise Denied("get", PRIORITY_CLASSES, f"the pods name PriorityClass {name}, whose value is their "
                                                  f"priority") from None
        except api.NotFound:
            continue
    return found, f"{PRIORITY_CLASSES.name} (forbidden): a global default class was not looked for"


def read_namespace(kube: api.Kube, name: str) -> dict | None:
    """The namespace object; None when there is none of that name (`api.Forbidden` when it may not be read)."""
    try:
        return kube.get(api.NAMESPACES, None, name)
    except api.NotFound:
        return None


def read_pod(kube: api.Kube, namespace: str, name: str) -> dict | None:
    """The pod as the API holds it; None when there is none of that name."""
    try:
        return kube.get(api.PODS, namespace, name)
    except api.NotFound:
        return None
    except api.Forbidden:
        raise Denied("get", api.PODS, f"pod {name} is in no group the pods listed show, and its labels would say "
                                      f"why", namespace) from None
