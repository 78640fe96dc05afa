"""The JSON Patch that makes a pod a gated member of its group.

Mutation is "copy, change the copy, diff the two" (as controller-runtime does): the diff gets
right what hand-built ops get wrong — a missing `metadata.labels` map (it adds the whole map),
`/` and `~` in keys (escaped as `~1` and `~0`), existing gates (the new one is appended, the
others keep their place). Only the three fields we may touch are copied and diffed, so the cost
does not grow with the pod spec.

The diff is ours, not `jsonpatch.make_patch`: on these small documents make_patch costs about
115 µs a call (it deep-copies and type-checks every node through ABCs), most of the policy's
time on a 6 KB pod (bench/webhook.md); this one costs a few µs. The property test applies its
output with the jsonpatch library.

The pods workload controllers create (a metadata map and a spec) get the same ops written out
directly (`_direct_ops`), a sixth of the diff's cost; the diff serves every other
pod, and a property test holds the two to the same ops wherever the direct one answers.
"""

import copy
from collections.abc import Mapping

from gangkeeper import names
from gangkeeper.identity import GroupIdentity


def gate_and_label(pod: Mapping, identity: GroupIdentity) -> list[dict]:
    """Ops adding the group label, the annotation saying where it came from, and our gate (after
    any others); an empty list when the pod already has all three."""
    ops = _direct_ops(pod, identity)
    return _diffed_ops(pod, identity) if ops is None else ops


def _diffed_ops(pod: Mapping, identity: GroupIdentity) -> list[dict]:
    """The ops by "copy, change the copy, diff the two": right for any pod."""
    before = _touched_fields(pod)
    # Deep enough to add keys and gates to; `before` is only read.
    after = {section: {key: copy.copy(value) for key, value in fields.items()} for section, fields in before.items()}
    metadata = after.setdefault("metadata", {})
    labels, annotations = metadata.setdefault("labels", {}), metadata.setdefault("annotations", {})
    # An explicit label stands as written (identity.name is that label then); the source is
    # always ours, whatever the pod claimed.
    labels.setdefault(names.GROUP_LABEL, identity.name)
    annotations[names.GROUP_SOURCE_ANNOTATION] = identity.source
    gates = after.setdefault("spec", {}).setdefault("schedulingGates", [])
    if not has_gate(pod):
        gates.append({"name": names.SCHEDULING_GATE})
    return diff(before, after)


def _direct_ops(pod: Mapping, identity: GroupIdentity) -> list[dict] | None:
    """The ops `_diffed_ops` gives, written out, for the pods workload controllers create: a
    metadata map and a spec, labels or not, annotations or not, gates or not; None for any other
    pod (no metadata or spec, a field of another type, or annotations without labels: the diff
    adds the labels map after the annotations then)."""
    metadata, spec = pod.get("metadata"), pod.get("spec")
    if not (isinstance(metadata, dict) and isinstance(spec, dict)):
        return None
    labels, annotations, gates = metadata.get("labels"), metadata.get("annotations"), spec.get("schedulingGates")
    if not ((labels is None or isinstance(labels, dict)) and (annotations is None or isinstance(annotations, dict))
            and (gates is None or isinstance(gates, list)) and (labels is not None or annotations is None)):
        return None
    ops: list[dict] = []
    if labels is None:
        ops.append({"op": "add", "path": "/metadata/labels", "value": {names.GROUP_LABEL: identity.name}})
    elif names.GROUP_LABEL not in labels:
        ops.append({"op": "add", "path": _LABEL_PATH, "value": identity.name})
    if annotations is None:
        ops.append({"op": "add", "path": "/metadata/annotations",
                    "value": {names.GROUP_SOURCE_ANNOTATION: identity.source}})
    elif names.GROUP_SOURCE_ANNOTATION not in annotations:
        ops.append({"op": "add", "path": _SOURCE_PATH, "value": identity.source})
    elif annotations[names.GROUP_SOURCE_ANNOTATION] != identity.source:
        ops.append({"op": "replace", "path": _SOURCE_PATH, "value": identity.source})
    if gates is None:
        ops.append({"op": "add", "path": "/spec/schedulingGates", "value": [{"name": names.SCHEDULING_GATE}]})
    elif not has_gate(pod):
        ops.append({"op": "add", "path": f"/spec/schedulingGates/{len(gates)}", "value": {"name": names.SCHEDULING_GATE}})
    return ops


def has_gate(pod: Mapping) -> bool:
    gates = (pod.get("spec") or {}).get("schedulingGates") or ()
    return any(isinstance(gate, dict) and gate.get("name") == names.SCHEDULING_GATE for gate in gates)


def diff(before: object, after: object, path: str = "") -> list[dict]:
    """RFC 6902 ops turning `before` into `after`: per key for objects, appends for a list that
    only grew, a replace of the whole value otherwise."""
    ops: list[dict] = []
    _diff_into(ops, before, after, path)
    return ops


def _diff_into(ops: list[dict], before: object, after: object, path: str) -> None:
    """`diff`, appending to `ops`: one list for the whole walk rather than a generator per level."""
    if isinstance(before, dict) and isinstance(after, dict):
        if not before.keys() <= after.keys():
            for key in before.keys() - after.keys():
                ops.append({"op": "remove", "path": f"{path}/{escape(key)}"})
        for key, value in after.items():
            if key not in before:
                ops.append({"op": "add", "path": f"{path}/{escape(key)}", "value": value})
            elif before[key] != value:
                _diff_into(ops, before[key], value, f"{path}/{escape(key)}")
    elif isinstance(before, list) and isinstance(after, list) and after[: len(before)] == before:
        for index in range(len(before), len(after)):
            ops.append({"op": "add", "path": f"{path}/{index}", "value": after[index]})
    else:
        ops.append({"op": "replace", "path": path, "value": after})


def escape(key: str) -> str:
    """A key as one JSON Pointer token (RFC 6901): `~` → `~0`, `/` → `~1`."""
    return key.replace("~", "~0").replace("/", "~1")


_LABEL_PATH = f"/metadata/labels/{escape(names.GROUP_LABEL)}"
_SOURCE_PATH = f"/metadata/annotations/{escape(names.GROUP_SOURCE_ANNOTATION)}"


def _touched_fields(pod: Mapping) -> dict:
    """The part of the pod a patch may change (the pod's own maps and gates, not copies), with
    the same paths as in the pod: a map that is absent (or null) in the pod is absent here too,
    so the diff adds it whole."""
    view: dict = {}
    for section, keys in (("metadata", ("labels", "annotations")), ("spec", ("schedulingGates",))):
        if section in pod:
            present = pod[section] or {}
            view[section] = {key: present[key] for key in keys if present.get(key) is not None}
    return view
