"""The OpenAPI v3 documents the emulated API server publishes, and the field validation they allow.

`kubectl apply` (and create, replace) validates by default: it reads `/openapi/v3`, then the
document of the object's group-version, and when that document's PATCH operation for the kind
takes the `fieldValidation` query parameter, it leaves validation to the server and sends
`fieldValidation=Strict` (client-side validation needs OpenAPI v2 in protobuf, which is not
served: /openapi/v2 is a 404, as on a server that publishes v3 only).

So the documents advertise `fieldValidation` and the server honours it (`unknown_fields`): with
Strict an object carrying a field its schema does not declare is refused with the real 400
(`strict decoding error: unknown field "spec.foo"`), with Warn it is let through with a warning
per field. The schemas are the Kubernetes 1.37 ones that `kubernetes-validate` ships (the ones
`tests/sim_cluster/test_served_shapes.py` holds every served object to) and, for custom resources,
their CRD's `openAPIV3Schema`: the CRD the emulation stores when it serves CRDs, else the one in
this checkout's deploy/base (the Gang's). A custom resource without a CRD (PyTorchJob, JobSet,
scheduler-plugins PodGroup) is published as an object that keeps unknown fields, its metadata
checked. Types and values are not checked here: that is the pod rules' and admission's work.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from pathlib import Path

import yaml

from sim.deployed import DEPLOY_BASE
from sim.kinds import Kind, Registry

log = logging.getLogger(__name__)

SCHEMA_VERSION = "v1.37.0-local"
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_PARAMETERS = [{"name": name, "in": "query", "description": description, "schema": {"type": "string"},
                "uniqueItems": True} for name, description in (
    ("dryRun", "When present, indicates that modifications should not be persisted."),
    ("fieldManager", "fieldManager is a name associated with the actor or entity that is making these changes."),
    ("fieldValidation", "fieldValidation instructs the server on how to handle objects in the request "
                        "(POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: Ignore, Warn, "
                        "Strict."))]


def definitions() -> dict[str, dict]:
    """The 1.37 definitions by name, as JSON Schema (`kubernetes-validate`'s, `#/$defs/` references)."""
    import kubernetes_validate  # a harness dependency, read when a document or validation needs it

    path = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / SCHEMA_VERSION / "_definitions.json"
    return json.loads(path.read_text())["$defs"]


def custom_resource_definitions(stored: list[dict] | None = None) -> list[dict]:
    """CRDs: those the emulation stores when it serves them (`stored`), else deploy/base's `crd-*.yaml`."""
    if stored is not None:
        return stored
    found = []
    for path in sorted(DEPLOY_BASE.glob("crd-*.yaml")):
        found += [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "CustomResourceDefinition"]
    return found


def crd_version(crds: list[dict], kind: Kind) -> dict | None:
    """The CRD version entry (schema, additionalPrinterColumns) that serves `kind`, if there is one."""
    for crd in crds:
        spec = crd.get("spec") or {}
        if spec.get("group") == kind.group and (spec.get("names") or {}).get("plural") == kind.plural:
            return next((v for v in spec.get("versions") or () if v.get("name") == kind.version), None)
    return None


class Documents:
    """Built on first use and kept: the index, a document per group-version, and each kind's schema."""

    def __init__(self, registry: Registry, crds: list[dict]):
        self._registry, self._crds = registry, crds
        self._lock = threading.Lock()
        self._built: tuple[dict, dict[str, dict], dict[Kind, dict], dict[str, dict]] | None = None

    def index(self) -> dict:
        return self._build()[0]

    def group_version(self, path: str) -> dict | None:
        """The document of `api/v1` or `apis/GROUP/VERSION`; None when no such group-version is served."""
        return self._build()[1].get(path)

    def unknown_fields(self, kind: Kind, obj: dict) -> list[str]:
        """The paths of fields in `obj` its kind's schema does not declare, as the strict decoder names them."""
        _, _, schemas, components = self._build()
        found: list[str] = []
        _walk(schemas[kind], obj, "", components, found)
        return found

    def _build(self):
        with self._lock:
            if self._built is None:
                self._built = _documents(self._registry, self._crds)
            return self._built


def _documents(registry: Registry, crds: list[dict]):
    source = definitions()
    by_kind = {(g["group"], g["version"], g["kind"]): name for name, d in source.items()
               for g in d.get("x-kubernetes-group-version-kind") or ()}
    components = {name: _to_openapi(schema) for name, schema in source.items()}
    schemas: dict[Kind, dict] = {}
    for kind in registry.kinds:
        name = by_kind.get((kind.group, kind.version, kind.kind))
        if name is not None:
            schemas[kind] = {"$ref": f"#/components/schemas/{name}"}
            continue
        name = _component_name(kind)
        components[name] = _custom_schema(kind, crd_version(crds, kind))
        schemas[kind] = {"$ref": f"#/components/schemas/{name}"}
    documents: dict[str, dict] = {}
    for kind in registry.kinds:
        path = f"apis/{kind.group}/{kind.version}" if kind.group else f"api/{kind.version}"
        document = documents.setdefault(path, {"openapi": "3.0.0", "info": {"title": "Kubernetes",
                                                                             "version": "v1.36.2"},
                                               "paths": {}, "components": {"schemas": {}}})
        document["paths"].update(_paths(kind, schemas[kind]))
    for document in documents.values():
        document["components"]["schemas"] = _closure(document, components)
    index = {"paths": {path: {"serverRelativeURL": f"/openapi/v3/{path}?hash={_hash(document)}"}
                       for path, document in documents.items()}}
    return index, documents, schemas, components


def _component_name(kind: Kind) -> str:
    return ".".join(reversed(kind.group.split("."))) + f".{kind.version}.{kind.kind}"


def _custom_schema(kind: Kind, version: dict | None) -> dict:
    """A custom resource's published schema: its CRD's, metadata as ObjectMeta; without one, anything."""
    gvk = [kind.group_version_kind()]
    schema = ((version or {}).get("schema") or {}).get("openAPIV3Schema")
    meta = {"allOf": [{"$ref": f"#/components/schemas/{OBJECT_META}"}], "description": "Standard object's metadata."}
    if schema is None:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True, "x-kubernetes-group-version-kind": gvk,
                "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": meta}}
    schema = json.loads(json.dumps(schema))
    schema.setdefault("properties", {})["metadata"] = meta
    schema["properties"].setdefault("apiVersion", {"type": "string"})
    schema["properties"].setdefault("kind", {"type": "string"})
    schema["x-kubernetes-group-version-kind"] = gvk
    return schema


def _to_openapi(schema):
    """JSON Schema of kubernetes-validate's local variant → OpenAPI 3: `#/$defs/` references become
    `#/components/schemas/`, `type: [T, "null"]` becomes `type: T`."""
    if isinstance(schema, list):
        return [_to_openapi(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "$ref":
            out[key] = value.replace("#/$defs/", "#/components/schemas/")
        elif key == "type" and isinstance(value, list):
            types = [t for t in value if t != "null"]
            if types:
                out[key] = types[0]
        elif key in ("properties", "patternProperties"):
            out[key] = {name: _to_openapi(s) for name, s in value.items()}
        else:
            out[key] = _to_openapi(value)
    if "$ref" in out and len(out) > 1:
        out = {"allOf": [{"$ref": out.pop("$ref")}], **out}
    return out


def _paths(kind: Kind, schema: dict) -> dict:
    prefix = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
    collection = f"{prefix}/namespaces/{{namespace}}/{kind.plural}" if kind.namespaced else f"{prefix}/{kind.plural}"
    scope = [{"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}}] \
        if kind.namespaced else []
    item_scope = scope + [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}]

    def operation(action: str, verb: str, parameters: list, body: bool = False) -> dict:
        op = {"operationId": f"{verb}{kind.kind}", "tags": [kind.group or "core"], "parameters": parameters,
              "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": schema}}}},
              "x-kubernetes-action": action, "x-kubernetes-group-version-kind": kind.group_version_kind()}
        if body:
            op["requestBody"] = {"content": {"application/json": {"schema": schema}}, "required": True}
        return op

    patch = operation("patch", "patch", item_scope + _PARAMETERS)
    patch["requestBody"] = {"content": {t: {"schema": {"type": "object"}} for t in (
        "application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml",
        *(["application/strategic-merge-patch+json"] if kind.strategic_merge else []))}, "required": True}
    return {collection: {"get": operation("list", "list", scope), "post": operation("post", "create", scope +
                                                                                  _PARAMETERS, True)},
            f"{collection}/{{name}}": {"get": operation("get", "read", item_scope),
                                       "put": operation("put", "replace", item_scope + _PARAMETERS, True),
                                       "patch": patch, "delete": operation("delete", "delete", item_scope)}}


def _closure(document: dict, components: dict) -> dict:
    """The components a document's paths reach, directly or through other components."""
    wanted, pending = {}, [document["paths"]]
    while pending:
        for ref in _references(pending.pop()):
            name = ref.removeprefix("#/components/schemas/")
            if name not in wanted and name in components:
                wanted[name] = components[name]
                pending.append(components[name])
    return dict(sorted(wanted.items()))


def _references(node) -> list[str]:
    if isinstance(node, dict):
        return ([node["$ref"]] if isinstance(node.get("$ref"), str) else []) + \
            [r for key, value in node.items() if key != "$ref" for r in _references(value)]
    if isinstance(node, list):
        return [r for value in node for r in _references(value)]
    return []


def _hash(document: dict) -> str:
    return hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest()[:128].upper()


# --- unknown fields ------------------------------------------------------------------------

def _resolve(schema: dict, components: dict) -> dict:
    while True:
        if "$ref" in schema:
            schema = components.get(schema["$ref"].removeprefix("#/components/schemas/"), {})
        elif len(schema.get("allOf") or ()) == 1 and "properties" not in schema:
            schema = schema["allOf"][0]
        else:
            return schema


def _walk(schema: dict, value, path: str, components: dict, found: list[str]) -> None:
    schema = _resolve(schema, components)
    if isinstance(value, dict):
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            properties = schema.get("properties") or {}
            for key in (k for k in value if k in properties):
                _walk(properties[key], value[key], _join(path, key), components, found)
            return
        if "properties" in schema:
            for key, item in value.items():
                if key in schema["properties"]:
                    _walk(schema["properties"][key], item, _join(path, key), components, found)
                else:
                    found.append(_join(path, key))
        elif isinstance(schema.get("additionalProperties"), dict):
            for key, item in value.items():
                _walk(schema["additionalProperties"], item, _join(path, key), components, found)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for position, item in enumerate(value):
            _walk(schema["items"], item, f"{path}[{position}]", components, found)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key
