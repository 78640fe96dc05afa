"""Authorization as kube-apiserver's RBAC authorizer decides it, over a fixed set of RBAC objects.

Without it the emulation let every authenticated request through, so the controller could make
calls that its manifests in deploy/ do not grant and that a real cluster answers with 403: its
Lease renewal was a merge patch while only `update` was granted. Built from the project's own
Roles, ClusterRoles and their bindings, it refuses what a real cluster would refuse, with the same
403 body.

Pure: `request_from_http` derives the request's attributes from method, path and query the way
the API server's RequestInfo does, and `Authorizer.allows` decides on them. The only I/O is
`load_manifests`, which reads the objects from YAML files.

What a real cluster has besides the given objects is here too: members of `system:masters` may do
anything (the authorizer in front of RBAC), and every authenticated user gets the bootstrap
policy's discovery, health and version paths and the self-reviews. Bindings whose role does not
exist are refused when the authorizer is built: a real cluster accepts them and grants nothing,
which in manifests is always a mistake worth stopping for.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from sim.api import APIError, User
from sim.deployed import DEPLOY_BASE
from sim.status import forbidden

# The RBAC gangkeeper installs, in the checkout beside this package (an installed wheel has none).
RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"
RBAC_KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
MASTERS = "system:masters"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"

_HTTP_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
# Paths under /namespaces/NAME/ that are the namespace's own subresources, not resources in it.
_NAMESPACE_SUBRESOURCES = ("status", "finalize")


def _cluster_role(name: str, *rules: dict) -> dict:
    return {"apiVersion": RBAC_API_VERSION, "kind": "ClusterRole", "metadata": {"name": name}, "rules": list(rules)}


def _bound_to_groups(name: str, *groups: str) -> dict:
    return {"apiVersion": RBAC_API_VERSION, "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g} for g in groups]}


_PUBLIC_PATHS = ["/livez", "/readyz", "/healthz", "/version", "/version/"]
# The part of kube-apiserver's bootstrap policy (plugin/pkg/auth/authorizer/rbac/bootstrappolicy)
# that applies to the users the emulation serves: discovery for every authenticated user.
BOOTSTRAP = (
    _cluster_role("system:discovery",
                  {"verbs": ["get"], "nonResourceURLs": [*_PUBLIC_PATHS, "/openapi", "/openapi/*", "/api", "/api/*",
                                                         "/apis", "/apis/*"]}),
    _cluster_role("system:basic-user",
                  {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"],
                   "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
                  {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"]}),
    _cluster_role("system:public-info-viewer", {"verbs": ["get"], "nonResourceURLs": _PUBLIC_PATHS}),
    _bound_to_groups("system:discovery", "system:authenticated"),
    _bound_to_groups("system:basic-user", "system:authenticated"),
    _bound_to_groups("system:public-info-viewer", "system:authenticated", "system:unauthenticated"),
)


@dataclass(frozen=True)
class Request:
    """The attributes RBAC decides on. A resource request names a resource; any other request
    (discovery, /healthz, /version) is decided on its `path`, with the HTTP method as its verb."""

    user: User
    verb: str
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""

    @property
    def is_resource_request(self) -> bool:
        return bool(self.resource)

    @property
    def target(self) -> str:
        """`pods`, `gangs.gangkeeper.io/status`, or the path: what a grant is about, in one string."""
        if not self.is_resource_request:
            return self.path
        resource = f"{self.resource}.{self.api_group}" if self.api_group else self.resource
        return f"{resource}/{self.subresource}" if self.subresource else resource


def watching(query: Mapping[str, str]) -> bool:
    """Whether a GET of a collection is a watch; the server streams exactly these."""
    return query.get("watch") in ("1", "true")


def request_from_http(user: User, method: str, path: str, query: Mapping[str, str]) -> Request:
    """The attributes of an HTTP request, as RequestInfo derives them (without the `/watch/` and
    `/proxy/` paths, which the emulation does not serve).

    A GET without a name is a list, or a watch; a DELETE without a name is a deletecollection. A
    list or watch names an object only through a field selector `metadata.name=NAME`, so only such
    a request can match a rule with resourceNames. A namespace's own path (`/api/v1/namespaces/NS`)
    is in that namespace, so a RoleBinding there can grant reading it.
    """
    trimmed = urllib.parse.unquote(path).strip("/")
    parts = trimmed.split("/") if trimmed else []
    prefix_parts = 2 if parts[:1] == ["api"] else 3 if parts[:1] == ["apis"] else None
    if prefix_parts is None or len(parts) <= prefix_parts:
        return Request(user, method.lower(), path=path)
    group, rest = ("" if prefix_parts == 2 else parts[1]), parts[prefix_parts:]
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource, name = rest[0], rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    verb = _HTTP_VERBS.get(method, "")
    if not name and verb == "get":
        verb = "watch" if watching(query) else "list"
        name = _selected_name(query.get("fieldSelector", ""))
    if not name and verb == "delete":
        verb = "deletecollection"
    return Request(user, verb, group, resource, subresource, namespace, name, path)


def _selected_name(field_selector: str) -> str:
    """The name a field selector requires exactly (a `metadata.name=` or `==` term), else ""."""
    for term in field_selector.split(","):
        field, operator, value = _split_term(term)
        if field == "metadata.name" and operator in ("=", "==") and value not in ("", ".", "..") \
                and "/" not in value and "%" not in value:
            return value
    return ""


def _split_term(term: str) -> tuple[str, str, str]:
    """`field`, operator and value of one selector term, the operator being the first one found."""
    for position in range(len(term)):
        for operator in ("!=", "==", "="):
            if term.startswith(operator, position):
                return term[:position], operator, term[position + len(operator):]
    return term, "", ""


class Authorizer:
    """RBAC over `objects` (Roles, ClusterRoles and their bindings, as dicts) and the bootstrap policy."""

    def __init__(self, objects: Iterable[Mapping]):
        self._roles: dict[tuple[str, str, str], list[Mapping]] = {}
        self._bindings: list[Mapping] = []
        for obj in (*BOOTSTRAP, *objects):
            metadata = obj["metadata"]
            if obj["kind"] in ("Role", "ClusterRole"):
                namespace = metadata.get("namespace", "") if obj["kind"] == "Role" else ""
                self._roles[(obj["kind"], namespace, metadata["name"])] = list(obj.get("rules") or ())
            elif obj["kind"] in ("RoleBinding", "ClusterRoleBinding"):
                self._bindings.append(obj)
        for binding in self._bindings:
            self._rules_of(binding)  # refuses a binding to a role that is not there

    def allows(self, request: Request) -> bool:
        if MASTERS in request.user.groups:
            return True
        return any(rule_allows(rule, request) for rule in self.rules_for(request.user, request.namespace))

    def rules_for(self, user: User, namespace: str) -> list[Mapping]:
        """Every rule that applies to `user` in `namespace` ("": cluster-wide rules only)."""
        rules: list[Mapping] = []
        for binding in self._bindings:
            scope = binding["metadata"].get("namespace", "") if binding["kind"] == "RoleBinding" else ""
            if binding["kind"] == "RoleBinding" and (not namespace or scope != namespace):
                continue
            if any(subject_matches(subject, user, scope) for subject in binding.get("subjects") or ()):
                rules += self._rules_of(binding)
        return rules

    def _rules_of(self, binding: Mapping) -> list[Mapping]:
        ref = binding["roleRef"]
        namespace = binding["metadata"].get("namespace", "") if ref["kind"] == "Role" else ""
        rules = self._roles.get((ref["kind"], namespace, ref["name"]))
        if rules is None:
            raise ValueError(f'{binding["kind"]} {binding["metadata"]["name"]} refers to {ref["kind"]} '
                             f'{ref["name"]}, which is not among the objects given')
        return rules


def subject_matches(subject: Mapping, user: User, binding_namespace: str) -> bool:
    """A ServiceAccount subject without a namespace means one in the binding's namespace."""
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return user.username == name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return bool(namespace) and user.username == f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"
    return False


def rule_allows(rule: Mapping, request: Request) -> bool:
    """RBAC's RuleAllows: verb, then API group, resource (with `*/sub`) and resourceNames, or the path.

    A rule with resourceNames matches only requests that carry one of those names, which is why a
    create (POST to the collection) or a deletecollection can never be granted by name.
    """
    verbs = rule.get("verbs") or ()
    if "*" not in verbs and request.verb not in verbs:
        return False
    if not request.is_resource_request:
        return any(url == "*" or url == request.path or (url.endswith("*") and request.path.startswith(url[:-1]))
                   for url in rule.get("nonResourceURLs") or ())
    groups = rule.get("apiGroups") or ()
    if "*" not in groups and request.api_group not in groups:
        return False
    resource = f"{request.resource}/{request.subresource}" if request.subresource else request.resource
    if not any(r in ("*", resource) or (request.subresource and r == f"*/{request.subresource}")
               for r in rule.get("resources") or ()):
        return False
    names = rule.get("resourceNames") or ()
    return not names or request.name in names


def refusal(request: Request) -> APIError:
    """The 403 the API server answers for a request no rule allows, worded as its Forbidden writer does."""
    who = f'User "{request.user.username}" cannot {request.verb}'
    if not request.is_resource_request:
        return forbidden("", "", "", f'{who} path "{request.path}"')
    resource = f"{request.resource}/{request.subresource}" if request.subresource else request.resource
    scope = f'in the namespace "{request.namespace}"' if request.namespace else "at the cluster scope"
    return forbidden(request.api_group, request.resource, request.name,
                     f'{who} resource "{resource}" in API group "{request.api_group}" {scope}')


def load_manifests(directory: Path) -> list[dict]:
    """The RBAC objects of the YAML files in `directory`, as `kubectl apply -f DIRECTORY` would create them."""
    objects = [document for path in sorted(directory.glob("*.yaml"))
               for document in yaml.safe_load_all(path.read_text())
               if document and document.get("apiVersion") == RBAC_API_VERSION and document.get("kind") in RBAC_KINDS]
    if not objects:
        raise ValueError(f"no RBAC objects in {directory}/*.yaml")
    return objects


def deployed_rbac(directory: Path = DEPLOY_BASE) -> Authorizer:
    """The RBAC `kubectl apply -k deploy/default` installs, read from deploy/base without kubectl: its
    kustomization renames and re-namespaces nothing (tests/deploy checks that the objects agree)."""
    return Authorizer(load_manifests(directory))
