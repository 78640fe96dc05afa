"""The three patch formats a client may send, applied as the real server applies them.

JSON Patch (RFC 6902) fails as a whole with the server's terse 422 - a failed `test` included,
which is how a guarded write learns it lost a race. JSON merge patch (RFC 7386) replaces lists.
Strategic merge patch merges lists of built-in types by their merge keys (containers by name,
schedulingGates by name, ...) and understands `$patch: delete|replace`.
"""

from sim.status import bad_request, patch_rejected
from sim.store import clone

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# patchMergeKey of the list fields a pod, node, job or namespace carries (from the Go struct tags).
MERGE_KEYS = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
    "ports": "containerPort", "volumes": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath",
    "schedulingGates": "name", "imagePullSecrets": "name", "conditions": "type", "ownerReferences": "uid",
    "hostAliases": "ip", "resourceClaims": "name", "topologySpreadConstraints": "topologyKey",
    "addresses": "type", "taints": "key",
}
# Lists of scalars merged as sets (patchStrategy "merge" without a key).
SET_LISTS = {"finalizers"}


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise patch_rejected()
    return [_unescape(t) for t in path[1:].split("/")]


def _parent(doc, tokens: list[str]):
    node = doc
    for token in tokens[:-1]:
        node = _child(node, token)
    return node


def _child(node, token: str):
    if isinstance(node, dict) and token in node:
        return node[token]
    if isinstance(node, list) and token.isdigit() and int(token) < len(node):
        return node[int(token)]
    raise patch_rejected()


def _add(doc, tokens: list[str], value):
    if not tokens:
        return value
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list) and (last == "-" or (last.isdigit() and int(last) <= len(parent))):
        parent.insert(len(parent) if last == "-" else int(last), value)
    else:
        raise patch_rejected()
    return doc


def _remove(doc, tokens: list[str]):
    parent, last = _parent(doc, tokens), tokens[-1] if tokens else None
    value = _child(parent, last)
    if isinstance(parent, dict):
        del parent[last]
    else:
        del parent[int(last)]
    return value


def _get(doc, tokens: list[str]):
    node = doc
    for token in tokens:
        node = _child(node, token)
    return node


def apply_json_patch(obj: dict, operations) -> dict:
    """RFC 6902 on a copy of `obj`; any failing operation rejects the whole patch."""
    if not isinstance(operations, list) or not all(isinstance(op, dict) for op in operations):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = clone(obj)
    for op in operations:
        doc = _apply_operation(doc, op)
    return doc


def _apply_operation(doc, op: dict):
    kind, tokens = op.get("op"), _pointer(op.get("path", ""))
    if kind in ("add", "replace", "test") and "value" not in op:
        raise patch_rejected()
    if kind == "add":
        return _add(doc, tokens, clone(op["value"]))
    if kind == "remove":
        _remove(doc, tokens)
        return doc
    if kind == "replace":
        _get(doc, tokens)
        if not tokens:
            return clone(op["value"])
        _remove(doc, tokens)
        return _add(doc, tokens, clone(op["value"]))
    if kind == "test":
        if _get(doc, tokens) != op["value"]:
            raise patch_rejected()
        return doc
    if kind in ("move", "copy"):
        source = _pointer(op.get("from", ""))
        value = _remove(doc, source) if kind == "move" else clone(_get(doc, source))
        return _add(doc, tokens, value)
    raise bad_request(f"Unexpected kind: {kind}")


def apply_merge_patch(target, patch):
    """RFC 7386: maps merge recursively, null removes a key, anything else replaces."""
    if not isinstance(patch, dict):
        return clone(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = apply_merge_patch(out.get(key), value)
    return out


def apply_strategic_merge_patch(target, patch, field: str = ""):
    """Strategic merge patch of a built-in object: lists with a merge key merge element by element."""
    if not isinstance(patch, dict):
        return clone(patch)
    if patch.get("$patch") == "replace":
        return {k: clone(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key == "$retainKeys":
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            out[name] = [v for v in out.get(name) or [] if v not in value]
        elif value is None:
            out.pop(key, None)
        elif isinstance(value, list):
            out[key] = _merge_list(out.get(key), value, key)
        else:
            merged = apply_strategic_merge_patch(out.get(key), value, key)
            if merged is None:
                out.pop(key, None)
            else:
                out[key] = merged
    return out


def _merge_list(current, patch: list, field: str) -> list:
    if field in SET_LISTS:
        base = list(current or [])
        return base + [v for v in patch if v not in base]
    key = MERGE_KEYS.get(field)
    if key is None or not all(isinstance(item, dict) for item in patch):
        if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
            return [clone(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
        return clone(patch)
    if any(item.get("$patch") == "replace" for item in patch):
        return [clone(i) for i in patch if "$patch" not in i]
    out = [dict(item) for item in current or [] if isinstance(item, dict)]
    for item in patch:
        if key not in item:
            raise bad_request(f"map: {item} does not contain declared merge key: {key}")
        index = next((i for i, existing in enumerate(out) if existing.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if index is not None:
                del out[index]
        elif index is None:
            out.append({k: clone(v) for k, v in item.items() if k != "$patch"})
        else:
            out[index] = apply_strategic_merge_patch(out[index], item, field)
    return out
