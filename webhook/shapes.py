"""Reading only what /mutate reads: an AdmissionReview decoded straight into the fields it reads.

The review of a training pod is about 7 KB of JSON, most of it container environments, volume
mounts and volumes that no decision of /mutate looks at. Parsing all of it into dicts was the
largest part of what /mutate adds to a request in a gunicorn worker (bench/RESULTS.md, the
webhook notes of issue 27). The review is decoded with msgspec into `MutateReview`, a `TypedDict`:
what it does not name is skipped without becoming Python objects, and what it names arrives as
the same plain dicts, lists and strings the API server sent, so the envelope check and the
policy run unchanged on it. Only /mutate reads this way: /validate reads the whole pod.

The shape is a promise about the policy: every key /mutate reads of a review is named, at every
level it looks into (tests/webhook/test_shapes.py records the reads of every pod in the
recordings of a real API server and of the webhook's tests, and holds them to the shape). A
field typed `Any` is kept whole, whatever it holds.

JSON that does not fit the shape (a field of another type than the shape says, or nesting deeper
than msgspec decodes) is parsed whole instead, so the envelope check sees what it always saw and
names what is wrong; JSON that is not even that raises orjson's error, as before. Within the
fields skipped, less is checked than orjson checks (invalid UTF-8 in an environment variable is
skipped, not refused): the API server has checked the object before it asks.
"""

from typing import Any, TypedDict

import msgspec

from gangkeeper.shaped import decoded


class _Container(TypedDict, total=False):
    name: Any
    resources: Any
    restartPolicy: Any


class _Metadata(TypedDict, total=False):
    name: Any
    generateName: Any
    namespace: Any
    uid: Any
    labels: Any
    annotations: Any
    ownerReferences: Any


class _Spec(TypedDict, total=False):
    containers: list[_Container]
    initContainers: list[_Container]
    overhead: Any
    nodeName: Any
    schedulingGates: Any
    schedulingGroup: Any


class _Pod(TypedDict, total=False):
    apiVersion: Any
    kind: Any
    metadata: _Metadata
    spec: _Spec


class _Request(TypedDict, total=False):
    uid: Any
    kind: Any
    resource: Any
    subResource: Any
    name: Any
    namespace: Any
    operation: Any
    userInfo: Any
    object: _Pod | None  # null on DELETE
    oldObject: _Pod | None  # null on CREATE
    dryRun: Any


class MutateReview(TypedDict, total=False):
    """What /mutate reads of an AdmissionReview: of the pod, its identity, labels, annotations,
    owners, gates and each container's resources."""

    apiVersion: Any
    kind: Any
    request: _Request


_MUTATE_REVIEW = msgspec.json.Decoder(MutateReview)


def mutate_review(body: bytes) -> Any:
    """`body` decoded through `MutateReview`; else read whole (`gangkeeper.shaped`)."""
    return decoded(_MUTATE_REVIEW, body)
