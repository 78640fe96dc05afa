"""The AdmissionReview v1 envelope: what the API server sends, and the answers we send back.

Only the envelope is checked here (a marshmallow schema); the objects under review stay plain
dicts for the policy to read. Unknown fields are ignored, so that a newer API server adding one
never turns into a refused pod. Every answer echoes the request's `uid`: the API server drops an
answer whose uid does not match.
"""

import binascii
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal, NamedTuple

import orjson
from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")


class ReviewError(ValueError):
    """The body is not an AdmissionReview v1 request; `uid` is set when one could be read."""

    def __init__(self, message: str, uid: str = ""):
        super().__init__(f"{message} (request uid {uid})" if uid else message)
        self.uid = uid


class _Object(fields.Raw):
    """An object under review: a JSON object kept as it is, or null.

    The fields the policy reads must have their Kubernetes types (OBJECT_SHAPE). The API server
    only ever sends typed objects, so only a broken or hostile client trips this; checking it
    here lets the policy read those fields without a type check at every step (found by
    bench/fuzz.py: a list where labels belong crashed the policy).
    """

    def _deserialize(self, value: object, attr: str | None, data: Mapping[str, Any] | None,
                     **kwargs: object) -> dict:
        if not isinstance(value, dict):
            raise ValidationError("must be a JSON object")
        problems = shape_problems(value)
        if problems:
            raise ValidationError(problems)
        return value


_CONTAINER_FIELDS = tuple(
    field for kind in ("containers", "initContainers") for field in (
        (("spec", kind), list), (("spec", kind, "[]"), dict), (("spec", kind, "[]", "resources"), dict),
        (("spec", kind, "[]", "resources", "requests"), dict), (("spec", kind, "[]", "resources", "limits"), dict)))
# What a field must be: a JSON type, or a shape that says more than a type.
Expected = type | Literal["strings", "reference"]
# (path, type) of every field of an object that the policy reads; "[]" stands for each item of a list.
OBJECT_SHAPE: tuple[tuple[tuple[str, ...], Expected], ...] = (
    (("metadata",), dict),
    (("metadata", "name"), str),
    (("metadata", "generateName"), str),
    (("metadata", "labels"), "strings"),
    (("metadata", "annotations"), "strings"),
    (("metadata", "ownerReferences"), list),
    (("metadata", "ownerReferences", "[]"), "reference"),
    (("spec",), dict),
    (("spec", "nodeName"), str),
    (("spec", "overhead"), dict),
    (("spec", "schedulingGates"), list),
    (("spec", "schedulingGates", "[]"), dict),
    (("spec", "schedulingGates", "[]", "name"), str),
    *_CONTAINER_FIELDS,
)
_TYPE_NAMES = {dict: "a JSON object", list: "a JSON array", str: "a string", "strings": "a map of strings",
               "reference": "an object with string name and uid (an OwnerReference)"}


def shape_problems(obj: dict) -> list[str]:
    """`path: must be …` for every field the policy reads that has the wrong JSON type (a null
    field is accepted: the policy reads it as absent; a null item of a list is not).

    A well-typed object, which is every object the API server sends, is confirmed by
    `well_typed`, which builds no paths; they are spelled out only for an object that has a
    problem."""
    return [] if well_typed(obj) else _problems(obj)


def _problems(obj: dict) -> list[str]:
    """shape_problems, path by path."""
    problems = []
    for steps, expected in OBJECT_SHAPE:
        for path, value in _found(obj, steps, ""):
            ok = _has_shape(value, expected)
            if not ok and (value is not None or steps[-1] == "[]"):
                problems.append(f"{path}: must be {_TYPE_NAMES[expected]}, not a JSON {_json_type(value)}")
    return problems


def well_typed(obj: object) -> bool:
    """Whether every field of OBJECT_SHAPE that `obj` has is of its type (`_problems` finds none).

    One walk of `_SHAPE_TREE`, which holds OBJECT_SHAPE's paths merged by their common steps:
    each field is looked up once however many paths pass through it, and no path is built. On
    the benchmark's 6 KB pod this costs a fifth of checking the paths one by one (4 µs, not 21)."""
    return _well_typed(obj, _SHAPE_TREE)


def _shape_tree(shape: Iterable[tuple[tuple[str, ...], Expected]]) -> tuple:
    """OBJECT_SHAPE as a tree of branches (step, type, shape, branches below): the value at the
    step must be an instance of the type and, for the shapes that say more than a type
    ("strings", "reference"), have that shape too. A step that is only on the way to a checked
    field checks nothing itself (type `object`)."""
    nested: dict = {}
    for steps, expected in shape:
        node = nested
        for step in steps[:-1]:
            node = node.setdefault(step, [object, {}])[1]
        node.setdefault(steps[-1], [object, {}])[0] = expected

    def branches(node: dict) -> tuple:
        return tuple((step, expected, None, branches(below)) if isinstance(expected, type)
                     else (step, dict, expected, branches(below)) for step, (expected, below) in node.items())

    return branches(nested)


def _well_typed(node: object, branches: tuple) -> bool:
    """`_found`'s walk without the paths: through dicts (a present key) and lists ("[]", each
    item), checking each value reached; a null field is acceptable and has nothing below it."""
    for step, kind, shape, below in branches:
        if step == "[]":
            if isinstance(node, list):
                for item in node:
                    if not (isinstance(item, kind) and (shape is None or _has_shape(item, shape))
                            and (not below or _well_typed(item, below))):
                        return False
        elif isinstance(node, dict):
            value = node.get(step)
            if value is not None and not (isinstance(value, kind) and (shape is None or _has_shape(value, shape))
                                          and (not below or _well_typed(value, below))):
                return False
    return True


def _has_shape(value: object, expected: Expected) -> bool:
    if isinstance(expected, type):
        return isinstance(value, expected)
    if expected == "strings":
        return isinstance(value, dict) and all(isinstance(item, str) for item in value.values())
    return isinstance(value, dict) and isinstance(value.get("name"), str) and isinstance(value.get("uid"), str)


def _found(node: object, steps: tuple[str, ...], path: str) -> Iterator[tuple[str, object]]:
    """(path, value) of every value at `steps` below `node`, through parents of the right type."""
    if not steps:
        yield path, node
    elif steps[0] == "[]" and isinstance(node, list):
        for index, item in enumerate(node):
            yield from _found(item, steps[1:], f"{path}[{index}]")
    elif isinstance(node, dict) and steps[0] in node:
        yield from _found(node[steps[0]], steps[1:], f"{path}.{steps[0]}" if path else steps[0])


def _json_type(value: object) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)


_SHAPE_TREE = _shape_tree(OBJECT_SHAPE)


class _Shape(fields.Raw):
    """A small JSON object whose listed keys must hold strings (a list of strings for `lists`).

    Checked in one function rather than by a nested schema: nested schemas cost more than the
    rest of the envelope together (bench/webhook.md).
    """

    def __init__(self, strings: tuple[str, ...], required_keys: tuple[str, ...] = (), lists: tuple[str, ...] = (),
                 **kwargs: Any):
        super().__init__(**kwargs)
        self.strings, self.required_keys, self.lists = strings, required_keys, lists

    def _deserialize(self, value: object, attr: str | None, data: Mapping[str, Any] | None,
                     **kwargs: object) -> dict:
        if not isinstance(value, dict):
            raise ValidationError("must be a JSON object")
        errors = {key: ["Missing data for required field."] for key in self.required_keys if key not in value}
        errors |= {key: ["Not a valid string."] for key in self.strings
                   if key in value and not isinstance(value[key], str)}
        errors |= {key: ["Not a valid list of strings."] for key in self.lists if key in value and not (
            isinstance(value[key], list) and all(isinstance(item, str) for item in value[key]))}
        if errors:
            raise ValidationError(errors)
        return value


class _Base(Schema):
    class Meta:
        unknown = EXCLUDE


class _Request(_Base):
    uid = fields.String(required=True, validate=validate.Length(min=1))
    kind = _Shape(("group", "version", "kind"), ("group", "version", "kind"), required=True)
    name = fields.String(load_default="")
    namespace = fields.String(load_default="")
    operation = fields.String(required=True, validate=validate.OneOf(OPERATIONS))
    userInfo = _Shape(("username", "uid"), lists=("groups",), required=True)
    object = _Object(load_default=None, allow_none=True)
    oldObject = _Object(load_default=None, allow_none=True)
    dryRun = fields.Boolean(load_default=False)
    subResource = fields.String(load_default="")


class _Review(_Base):
    apiVersion = fields.String(required=True, validate=validate.Equal(API_VERSION))
    kind = fields.String(required=True, validate=validate.Equal(KIND))
    request = fields.Nested(_Request, required=True)


_SCHEMA = _Review()


class AdmissionRequest(NamedTuple):
    """The parts of `request` that the policy reads (a tuple: built on every request, it costs
    half what a frozen dataclass of ten fields does)."""

    uid: str
    group: str
    kind: str
    operation: str
    namespace: str
    name: str
    username: str
    object: dict | None
    old_object: dict | None
    dry_run: bool
    sub_resource: str = ""  # "status" for a write of a Gang's status

    @property
    def pod_name(self) -> str:
        """The name for logs: a generateName pod has none yet at CREATE."""
        metadata = (self.object or self.old_object or {}).get("metadata") or {}
        return self.name or metadata.get("name") or metadata.get("generateName") or ""


def parse_review(document: object) -> AdmissionRequest:
    """The request of an AdmissionReview v1 document; ReviewError names every bad field.

    A plainly well-formed review (every one the API server sends) is read by `_well_formed`, a
    few dict lookups; anything else goes through the marshmallow schema, which accepts what it
    can convert and names every problem. The schema alone cost about a third of a request's
    time in the webhook (bench/webhook.md), and a property test holds the two to the same answer.
    """
    if not isinstance(document, dict):
        raise ReviewError(f"the body is a JSON {type(document).__name__}, not an {KIND} object")
    quick = _well_formed(document)
    if quick is not None:
        return quick
    try:
        review = _SCHEMA.load(document)
    except ValidationError as error:
        raise ReviewError(f"not an {KIND} {API_VERSION}: {_describe(error.messages)}", _uid_of(document)) from None
    request = review["request"]
    return AdmissionRequest(
        uid=request["uid"],
        group=request["kind"]["group"],
        kind=request["kind"]["kind"],
        operation=request["operation"],
        namespace=request["namespace"],
        name=request["name"],
        username=request["userInfo"].get("username", ""),
        object=request["object"],
        old_object=request["oldObject"],
        dry_run=request["dryRun"],
        sub_resource=request["subResource"],
    )


def _well_formed(document: dict) -> AdmissionRequest | None:
    """The request, when every field the schema checks already has its final type and value;
    None when anything would need the schema (to convert a value, or to say what is wrong)."""
    request = document.get("request")
    if document.get("apiVersion") != API_VERSION or document.get("kind") != KIND or not isinstance(request, dict):
        return None
    uid, kind, user = request.get("uid"), request.get("kind"), request.get("userInfo")
    name, namespace, dry_run = request.get("name", ""), request.get("namespace", ""), request.get("dryRun", False)
    sub_resource = request.get("subResource", "")
    if not (isinstance(uid, str) and uid and request.get("operation") in OPERATIONS and isinstance(name, str)
            and isinstance(sub_resource, str)
            and isinstance(namespace, str) and isinstance(dry_run, bool) and isinstance(kind, dict)
            and isinstance(user, dict) and isinstance(kind.get("group"), str) and isinstance(kind.get("version"), str)
            and isinstance(kind.get("kind"), str) and isinstance(user.get("username", ""), str)
            and isinstance(user.get("uid", ""), str) and _strings(user.get("groups", []))):
        return None
    obj, old = request.get("object"), request.get("oldObject")
    if not (_acceptable_object(obj) and _acceptable_object(old)):
        return None
    return AdmissionRequest(uid=uid, group=kind["group"], kind=kind["kind"], operation=request["operation"],
                            namespace=namespace, name=name, username=user.get("username", ""), object=obj,
                            old_object=old, dry_run=dry_run, sub_resource=sub_resource)


def _acceptable_object(value: object) -> bool:
    """What `_Object` accepts as it is: null, or a well-typed JSON object."""
    return value is None or (isinstance(value, dict) and well_typed(value))


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _uid_of(document: Mapping) -> str:
    request = document.get("request")
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) else ""


def _describe(messages: object, path: str = "") -> str:
    """marshmallow's nested error dict as `field.path: message; …`."""
    if isinstance(messages, dict):
        return "; ".join(_describe(value, f"{path}.{key}" if path else str(key)) for key, value in messages.items())
    if isinstance(messages, list):
        return f"{path}: {' '.join(str(message) for message in messages)}"
    return f"{path}: {messages}"


# --- answers -------------------------------------------------------------------------------


def _review(response: dict) -> dict:
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def allowed(uid: str, warnings: Iterable[str] = ()) -> dict:
    response: dict = {"uid": uid, "allowed": True}
    if warnings:
        response["warnings"] = list(warnings)
    return _review(response)


def denied(uid: str, message: str, code: int = 403, warnings: Iterable[str] = ()) -> dict:
    response: dict = {"uid": uid, "allowed": False, "status": {"code": code, "message": message}}
    if warnings:
        response["warnings"] = list(warnings)
    return _review(response)


def patched(uid: str, ops: list[dict], warnings: Iterable[str] = ()) -> dict:
    review = allowed(uid, warnings)
    review["response"]["patchType"] = "JSONPatch"
    review["response"]["patch"] = binascii.b2a_base64(orjson.dumps(ops), newline=False).decode()
    return review


def errored(uid: str, message: str, code: int = 500) -> dict:
    """An internal failure: not allowed (the webhook fails closed), with a status the API server shows."""
    return denied(uid, message, code)
