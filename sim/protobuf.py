"""Request bodies in Kubernetes' protobuf encoding, read into the JSON the API server works on.

client-go's generated clientsets send built-in kinds as `application/vnd.kubernetes.protobuf`
and never fall back to JSON (its 415 fallback is for CBOR only), so `kubectl create namespace`
and `kubectl drain` arrive in protobuf. Answers stay JSON: every client lists `application/json`
after protobuf in its Accept header. The envelope is the magic `k8s\\x00` and a `runtime.Unknown`
(typeMeta, raw); `raw` is the object in the field numbers of k8s.io/api's generated.proto, of
which the messages below are transcribed. A kind not transcribed is refused with 415, naming
the kinds that are, rather than read wrongly.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sim.api import APIError
from sim.status import status

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
_MAGIC = b"k8s\x00"

# A message is {field number: (JSON name, type)}; a type is a scalar name, a message, or
# ("repeated", type) / ("map", type) — maps are repeated entries of key = 1, value = 2.
_TIME = "time"  # metav1.Time: seconds = 1, nanos = 2
_OWNER_REFERENCE = {1: ("kind", "string"), 3: ("name", "string"), 4: ("uid", "string"),
                    5: ("apiVersion", "string"), 6: ("controller", "bool"), 7: ("blockOwnerDeletion", "bool")}
_OBJECT_META = {1: ("name", "string"), 2: ("generateName", "string"), 3: ("namespace", "string"),
                5: ("uid", "string"), 6: ("resourceVersion", "string"), 7: ("generation", "int"),
                8: ("creationTimestamp", _TIME), 9: ("deletionTimestamp", _TIME),
                10: ("deletionGracePeriodSeconds", "int"), 11: ("labels", ("map", "string")),
                12: ("annotations", ("map", "string")), 13: ("ownerReferences", ("repeated", _OWNER_REFERENCE)),
                14: ("finalizers", ("repeated", "string"))}
_PRECONDITIONS = {1: ("uid", "string"), 2: ("resourceVersion", "string")}
_DELETE_OPTIONS = {1: ("gracePeriodSeconds", "int"), 2: ("preconditions", _PRECONDITIONS),
                   3: ("orphanDependents", "bool"), 4: ("propagationPolicy", "string"),
                   5: ("dryRun", ("repeated", "string"))}
MESSAGES = {
    ("v1", "Namespace"): {1: ("metadata", _OBJECT_META), 2: ("spec", {1: ("finalizers", ("repeated", "string"))}),
                          3: ("status", {1: ("phase", "string")})},
    ("policy/v1", "Eviction"): {1: ("metadata", _OBJECT_META), 2: ("deleteOptions", _DELETE_OPTIONS)},
    ("v1", "DeleteOptions"): _DELETE_OPTIONS,
    ("meta.k8s.io/v1", "DeleteOptions"): _DELETE_OPTIONS,
    ("scheduling.k8s.io/v1", "PriorityClass"): {1: ("metadata", _OBJECT_META), 2: ("value", "int"),
                                                3: ("globalDefault", "bool"), 4: ("description", "string"),
                                                5: ("preemptionPolicy", "string")},
}
_UNKNOWN = {1: ("typeMeta", {1: ("apiVersion", "string"), 2: ("kind", "string")}), 2: ("raw", "bytes")}


def unsupported(what: str) -> APIError:
    kinds = ", ".join(f"{kind} ({version})" for version, kind in MESSAGES)
    return APIError(status(415, "UnsupportedMediaType",
                           f"the emulated API server reads protobuf bodies of {kinds} only, not {what}; send "
                           "application/json (kubectl create -f, apply and patch do)"))


def decode(body: bytes) -> dict:
    """The object a protobuf request body holds, as JSON would have carried it."""
    if not body.startswith(_MAGIC):
        raise unsupported("a body without the k8s protobuf envelope")
    try:
        envelope = _message(memoryview(body)[len(_MAGIC):], _UNKNOWN)
    except (IndexError, ValueError) as error:
        raise APIError(status(400, "BadRequest", f"the protobuf body cannot be read: {error}")) from None
    type_meta = envelope.get("typeMeta") or {}
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    schema = MESSAGES.get((api_version, kind))
    if schema is None:
        raise unsupported(f"{kind or 'an object'} ({api_version or 'no apiVersion'})")
    try:
        obj = _message(memoryview(envelope.get("raw", b"")), schema)
    except (IndexError, ValueError) as error:
        raise APIError(status(400, "BadRequest", f"the protobuf {kind} cannot be read: {error}")) from None
    return {"apiVersion": api_version, "kind": kind, **obj}


def _varint(data: memoryview, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise ValueError("a varint longer than 10 bytes")


def _fields(data: memoryview):
    """(field number, wire type, value) of each field: an int for varints, bytes for the rest."""
    at = 0
    while at < len(data):
        tag, at = _varint(data, at)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 2:
            length, at = _varint(data, at)
            value, at = data[at:at + length], at + length
            if at > len(data):
                raise ValueError("a field runs past the end of the body")
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, at = data[at:at + size], at + size
        else:
            raise ValueError(f"wire type {wire} of field {number} is not read")
        yield number, wire, value


def _message(data: memoryview, schema: dict) -> dict:
    out: dict = {}
    for number, _, value in _fields(data):
        if number not in schema:
            continue  # a field the emulation does not keep (managedFields, selfLink)
        name, kind = schema[number]
        if isinstance(kind, tuple) and kind[0] == "map":
            entry = _message(value, {1: ("key", "string"), 2: ("value", kind[1])})
            out.setdefault(name, {})[entry.get("key", "")] = entry.get("value", "")
        elif isinstance(kind, tuple):
            out.setdefault(name, []).append(_scalar(value, kind[1]))
        else:
            out[name] = _scalar(value, kind)
    return out


def _scalar(value, kind):
    if isinstance(kind, dict):
        return _message(value, kind)
    if kind == "string":
        return bytes(value).decode()
    if kind == "bytes":
        return bytes(value)
    if kind == "bool":
        return bool(value)
    if kind == "int":
        return value - (1 << 64) if value >= 1 << 63 else value  # int64 two's complement
    if kind == _TIME:
        seconds = _message(value, {1: ("seconds", "int")}).get("seconds", 0)
        return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    raise ValueError(f"no reader for {kind}")
