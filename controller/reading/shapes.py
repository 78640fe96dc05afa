"""Reading only what a transform reads: list pages and watch events decoded into its fields.

A pod as the API server returns it is about 5 KB of JSON (managed fields, environment, volume
mounts, container statuses), and the informers' caches keep what `pod_facts` makes of it, which
reads a few hundred bytes. Parsing all of it into dicts only to drop them again was most of a
relist (150,000 pods at a restart). A `Reading` decodes the JSON straight into the fields its
transform reads, written as a `TypedDict` (with msgspec): what is not named is skipped without
becoming Python objects, and what is named arrives as the same plain dicts, lists and strings
the API sent, so the transform runs unchanged.

A shape is a promise about the transform: every key it reads is named, at every level it looks
into (tests/controller_io/test_reading.py records the reads and holds each transform to its
shape). A field typed `Any` is kept whole, whatever it holds. Only the informers use a reading;
every other request gets the whole object.

JSON that does not fit the shape (a field of another type than the shape says: a null list, a
Status where an object was expected, or nesting deeper than msgspec decodes) is parsed whole
instead, so the transform sees what it always saw; JSON that is not even that raises orjson's
`ValueError`, as before. Within the fields skipped, less is checked than orjson checks (invalid
UTF-8 in an environment variable is skipped, not refused), and a whole number beyond 64 bits in
a field kept stays exact where orjson made it a float (the API server allows none there).
"""

from typing import Any, TypedDict

import msgspec
import orjson

from gangkeeper.shaped import decoded


class Reading:
    """Decoders for one shape: a list page (`items` of the shape) and a watch event (its `object`)."""

    def __init__(self, shape: type):
        self.shape = shape
        # TypedDicts made at run time, for msgspec to decode into; mypy knows only those written out.
        items = list[shape]  # type: ignore[valid-type]  # a list of the shape given: a variable to mypy
        page = TypedDict(f"{shape.__name__}List", {"metadata": Any, "items": items}, total=False)  # type: ignore[misc]
        event = TypedDict(f"{shape.__name__}Event", {"type": Any, "object": shape}, total=False)  # type: ignore[misc]
        self._page = msgspec.json.Decoder(page)
        self._event = msgspec.json.Decoder(event)

    def page(self, data: bytes) -> dict:
        """A list page with each item cut to the shape."""
        return decoded(self._page, data)

    def event(self, line: bytes) -> dict:
        """A watch event with its object cut to the shape. An ERROR event's object is a Status,
        not an object of the shape: it is read whole."""
        event = decoded(self._event, line)
        if isinstance(event, dict) and event.get("type") == "ERROR":
            return orjson.loads(line)
        return event


# --- the shapes the informers read -------------------------------------------------------------
# Named here beside each other so that one look shows everything the controller reads of a pod
# and a node; `controller.reading.pods.pod_facts` and `controller.reading.nodes.node_from_api` are what read them.

class _Port(TypedDict, total=False):
    hostPort: Any
    hostIP: Any
    protocol: Any


class _Container(TypedDict, total=False):
    name: Any
    resources: Any
    ports: list[_Port]
    restartPolicy: Any


class _Volume(TypedDict, total=False):
    persistentVolumeClaim: Any


class _Condition(TypedDict, total=False):
    type: Any
    reason: Any
    message: Any


class _PodMetadata(TypedDict, total=False):
    name: Any
    namespace: Any
    uid: Any
    resourceVersion: Any
    creationTimestamp: Any
    deletionTimestamp: Any
    labels: Any
    annotations: Any
    ownerReferences: Any


class _PodSpec(TypedDict, total=False):
    containers: list[_Container]
    initContainers: list[_Container]
    overhead: Any
    nodeName: Any
    nodeSelector: Any
    affinity: Any
    tolerations: Any
    schedulingGates: Any
    priority: Any
    preemptionPolicy: Any
    volumes: list[_Volume]
    resourceClaims: Any
    topologySpreadConstraints: Any


class _PodStatus(TypedDict, total=False):
    phase: Any
    conditions: list[_Condition]
    resourceClaimStatuses: Any


class Pod(TypedDict, total=False):
    """What `pod_facts` reads of a pod: no managed fields, container environments or statuses."""

    apiVersion: Any
    kind: Any
    metadata: _PodMetadata
    spec: _PodSpec
    status: _PodStatus


class _NodeMetadata(TypedDict, total=False):
    name: Any
    namespace: Any  # none on a node: read to key the cache
    resourceVersion: Any
    labels: Any


class _NodeSpec(TypedDict, total=False):
    taints: Any
    unschedulable: Any


class _NodeStatus(TypedDict, total=False):
    allocatable: Any
    conditions: Any


class Node(TypedDict, total=False):
    """What `node_from_api` reads of a node: no images, addresses, node info or managed fields."""

    apiVersion: Any
    kind: Any
    metadata: _NodeMetadata
    spec: _NodeSpec
    status: _NodeStatus


PODS = Reading(Pod)
NODES = Reading(Node)
