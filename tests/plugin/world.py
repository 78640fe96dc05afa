"""Small clusters for the plugin's tests, as raw API objects: GPU nodes, and groups of pods
labelled into an explicit group the way the webhook leaves them, each holding its min count."""

from datetime import datetime

from gangkeeper import names
from gangkeeper.controller.reading import kube as api
from gangkeeper.plugin import explain
from gangkeeper.plugin.reading import read_cluster
from tests.controller.builders import node_object, pod_object
from tests.plugin.fakekube import FakeKube

CREATED = "2025-01-01T00:00:00Z"
NOW = datetime.fromisoformat(CREATED).timestamp() + 600


def node(name, gpus=8, **kwargs):
    return api.NODES, node_object(name, gpus=gpus, **kwargs)


def member(group, index, *, size, gpus=8, node_name=None, namespace="team", priority=0, created=CREATED,
           gated=None, reserved_node=None, preemption_policy=None):
    pod = pod_object(f"{group}-{index}", gpus=gpus, namespace=namespace, node_name=node_name, priority=priority,
                     gated=node_name is None if gated is None else gated, reserved_node=reserved_node,
                     phase="Running" if node_name else "Pending", created=created)
    pod["metadata"]["labels"] = {names.GROUP_LABEL: group}
    pod["metadata"]["annotations"].update({names.MIN_COUNT_ANNOTATION: str(size),
                                           names.GROUP_SOURCE_ANNOTATION: names.SOURCE_EXPLICIT})
    if preemption_policy:
        pod["spec"]["preemptionPolicy"] = preemption_policy
    return api.PODS, pod


def waiting(group, size, **kwargs):
    """A complete group, every member gated with nothing reserved."""
    return [member(group, index, size=size, **kwargs) for index in range(size)]


def running(group, nodes, **kwargs):
    """A group of one member bound on each of `nodes`."""
    return [member(group, index, size=len(nodes), node_name=name, **kwargs) for index, name in enumerate(nodes)]


def gang(name, group, min_count, namespace="team", status=None):
    return api.GANGS, {"apiVersion": f"{names.GANG_GROUP}/{names.GANG_VERSION}", "kind": names.GANG_KIND,
                       "metadata": {"name": name, "namespace": namespace, "uid": f"uid-gang-{name}"},
                       "spec": {"minCount": min_count, "groupName": group}, "status": status or {}}


def why(objects, target, *, planning=explain.Planning(), namespace="team", events=(), **fake):
    """`why` on a cluster of `objects`, as the command asks it."""
    cluster = read_cluster(FakeKube(objects, **fake), [namespace])
    index = cluster.index()
    views = index.pending({}, NOW).views
    found = explain.find_group(index, views, namespace, target)
    assert found is not None, f"{target} names no group"
    return explain.why(index, views, *found, events, planning, NOW, cluster.unread)

