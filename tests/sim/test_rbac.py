"""RBAC in the emulated API server: the decisions of kube-apiserver's RBAC authorizer, its 403s,
and the controller's service account held to exactly what deploy/ grants it."""

import pytest

from gangkeeper import names
from sim.api import ADMIN, CONTROLLER, User
from sim.apiserver import APIServer
from sim.rbac import Authorizer, Request, deployed_rbac, refusal, request_from_http
from sim.server import Decision, RunningServer
from tests.sim.helpers import http, namespace, pod

ALICE = User("alice")
LEASES = "/apis/coordination.k8s.io/v1/namespaces/ml/leases"


def role(name: str, *rules: dict, namespace: str | None = None) -> dict:
    kind = "Role" if namespace else "ClusterRole"
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": metadata, "rules": list(rules)}


def rule(verbs: str, resources: str, group: str = "", names: str = "") -> dict:
    out = {"apiGroups": [group], "resources": resources.split(), "verbs": verbs.split()}
    if names:
        out["resourceNames"] = names.split()
    return out


def binding(role_obj: dict, *subjects: dict, namespace: str | None = None) -> dict:
    kind = "RoleBinding" if namespace else "ClusterRoleBinding"
    metadata = {"name": f"{role_obj['metadata']['name']}-binding", **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_obj["kind"],
                        "name": role_obj["metadata"]["name"]},
            "subjects": list(subjects)}


def user(name: str) -> dict:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}


def granted_to_alice(*rules: dict, namespace: str | None = None) -> Authorizer:
    granted = role("granted", *rules, namespace=namespace)
    return Authorizer([granted, binding(granted, user("alice"), namespace=namespace)])


def allows(authorizer: Authorizer, method: str, path: str, who: User = ALICE, **query: str) -> bool:
    return authorizer.allows(request_from_http(who, method, path, query))


# --- what a request asks for ---------------------------------------------------------------------

@pytest.mark.parametrize(("method", "path", "query", "expected"), [
    ("GET", "/api/v1/namespaces/ml/pods/p", {}, ("get", "", "pods", "", "ml", "p")),
    ("GET", "/api/v1/pods", {}, ("list", "", "pods", "", "", "")),
    ("GET", "/api/v1/namespaces/ml/pods", {"watch": "true"}, ("watch", "", "pods", "", "ml", "")),
    ("GET", "/api/v1/nodes", {"watch": "1"}, ("watch", "", "nodes", "", "", "")),
    ("POST", "/api/v1/namespaces/ml/pods", {}, ("create", "", "pods", "", "ml", "")),
    ("POST", "/api/v1/namespaces/ml/pods/p/binding", {}, ("create", "", "pods", "binding", "ml", "p")),
    ("PUT", "/apis/gangkeeper.io/v1alpha1/namespaces/ml/gangs/g", {},
     ("update", "gangkeeper.io", "gangs", "", "ml", "g")),
    ("PATCH", "/apis/gangkeeper.io/v1alpha1/namespaces/ml/gangs/g/status", {},
     ("patch", "gangkeeper.io", "gangs", "status", "ml", "g")),
    ("DELETE", "/api/v1/namespaces/ml/pods/p", {}, ("delete", "", "pods", "", "ml", "p")),
    ("DELETE", "/api/v1/namespaces/ml/pods", {}, ("deletecollection", "", "pods", "", "ml", "")),
    ("GET", "/api/v1/namespaces/ml", {}, ("get", "", "namespaces", "", "ml", "ml")),
    ("PUT", "/api/v1/namespaces/ml/status", {}, ("update", "", "namespaces", "status", "ml", "ml")),
    ("GET", "/api/v1/nodes/n1", {}, ("get", "", "nodes", "", "", "n1")),
])
def test_the_verb_and_the_object_come_from_method_path_and_query(method, path, query, expected):
    request = request_from_http(ALICE, method, path, query)
    assert request.is_resource_request
    assert (request.verb, request.api_group, request.resource, request.subresource, request.namespace,
            request.name) == expected


@pytest.mark.parametrize("path", ["/api", "/api/v1", "/apis", "/apis/gangkeeper.io", "/apis/gangkeeper.io/v1alpha1",
                                  "/version", "/healthz"])
def test_discovery_and_health_are_paths_with_the_method_as_verb(path):
    request = request_from_http(ALICE, "GET", path, {})
    assert (request.is_resource_request, request.verb, request.path) == (False, "get", path)


# --- resourceNames ---------------------------------------------------------------------------------

NAMED_LEASE = granted_to_alice(rule("get list watch patch", "leases", "coordination.k8s.io", names="ours"))


def test_a_named_rule_allows_its_object_and_no_other():
    assert allows(NAMED_LEASE, "GET", f"{LEASES}/ours") and allows(NAMED_LEASE, "PATCH", f"{LEASES}/ours")
    assert not allows(NAMED_LEASE, "GET", f"{LEASES}/theirs")
    assert not allows(NAMED_LEASE, "PATCH", f"{LEASES}/theirs")


@pytest.mark.parametrize("watch", ["false", "true"])
def test_a_named_rule_allows_a_list_or_watch_only_when_the_field_selector_names_its_object(watch):
    assert allows(NAMED_LEASE, "GET", LEASES, watch=watch, fieldSelector="metadata.name=ours")
    assert allows(NAMED_LEASE, "GET", LEASES, watch=watch, fieldSelector="metadata.name==ours")
    assert not allows(NAMED_LEASE, "GET", LEASES, watch=watch)
    assert not allows(NAMED_LEASE, "GET", LEASES, watch=watch, fieldSelector="metadata.name=theirs")
    assert not allows(NAMED_LEASE, "GET", LEASES, watch=watch, fieldSelector="metadata.name!=ours")


def test_create_and_deletecollection_are_never_allowed_by_a_named_rule():
    authorizer = granted_to_alice(rule("create deletecollection", "leases", "coordination.k8s.io", names="ours"))
    assert not allows(authorizer, "POST", LEASES)  # the name in the body is not the request's
    assert not allows(authorizer, "DELETE", LEASES, fieldSelector="metadata.name=ours")
    assert allows(granted_to_alice(rule("create", "leases", "coordination.k8s.io")), "POST", LEASES)


def test_wildcards_match_every_verb_group_and_resource_and_star_slash_every_subresource_of_that_name():
    everything = granted_to_alice({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]})
    assert allows(everything, "DELETE", "/apis/gangkeeper.io/v1alpha1/namespaces/ml/gangs/g")
    assert not allows(everything, "GET", "/metrics")  # a resource rule says nothing about paths
    statuses = granted_to_alice(rule("patch", "*/status", "gangkeeper.io"))
    assert allows(statuses, "PATCH", "/apis/gangkeeper.io/v1alpha1/namespaces/ml/gangs/g/status")
    assert not allows(statuses, "PATCH", "/apis/gangkeeper.io/v1alpha1/namespaces/ml/gangs/g")


# --- who is bound where ----------------------------------------------------------------------------

def test_a_role_binding_grants_only_in_its_namespace():
    authorizer = granted_to_alice(rule("get list", "pods"), namespace="ml")
    assert allows(authorizer, "GET", "/api/v1/namespaces/ml/pods/p")
    assert not allows(authorizer, "GET", "/api/v1/namespaces/other/pods/p")
    assert not allows(authorizer, "GET", "/api/v1/pods")


def test_a_cluster_role_bound_in_a_namespace_grants_there_only():
    reader = role("pod-reader", rule("list", "pods"))
    authorizer = Authorizer([reader, binding(reader, user("alice"), namespace="ml")])
    assert allows(authorizer, "GET", "/api/v1/namespaces/ml/pods")
    assert not allows(authorizer, "GET", "/api/v1/namespaces/other/pods")
    assert not allows(authorizer, "GET", "/api/v1/pods")


def test_a_cluster_role_binding_grants_in_every_namespace_and_cluster_wide():
    authorizer = granted_to_alice(rule("list", "pods"))
    assert allows(authorizer, "GET", "/api/v1/pods") and allows(authorizer, "GET", "/api/v1/namespaces/any/pods")


def test_a_service_account_is_matched_by_its_name_and_by_its_groups():
    reader = role("pod-reader", rule("list", "pods"))
    by_account = Authorizer([reader, binding(reader, {"kind": "ServiceAccount", "name": "gangkeeper-controller"},
                                             namespace=names.DEFAULT_NAMESPACE)])
    by_group = Authorizer([reader, binding(reader, {"kind": "Group", "name": "system:serviceaccounts:gangkeeper"})])
    path = f"/api/v1/namespaces/{names.DEFAULT_NAMESPACE}/pods"
    assert allows(by_account, "GET", path, CONTROLLER)  # no namespace: the binding's
    assert not allows(by_account, "GET", path, User("system:serviceaccount:other:gangkeeper-controller"))
    assert allows(by_group, "GET", "/api/v1/pods", CONTROLLER)
    assert not allows(by_group, "GET", "/api/v1/pods", ALICE)


def test_system_masters_may_do_anything_without_a_single_grant():
    authorizer = Authorizer([])
    assert allows(authorizer, "DELETE", "/api/v1/namespaces/kube-system/secrets", ADMIN)
    assert not allows(authorizer, "GET", "/api/v1/namespaces/kube-system/secrets")


@pytest.mark.parametrize("path", ["/api", "/api/v1", "/apis", "/apis/gangkeeper.io/v1alpha1", "/version", "/version/",
                                  "/healthz", "/readyz", "/livez", "/openapi/v3"])
def test_every_authenticated_user_may_discover_the_api_and_read_its_health(path):
    authorizer = Authorizer([])
    assert allows(authorizer, "GET", path)
    assert not allows(authorizer, "POST", path)
    assert not allows(authorizer, "GET", path, User("nobody", groups=()))


def test_other_paths_are_refused_to_an_authenticated_user():
    assert not allows(Authorizer([]), "GET", "/metrics")


def test_a_binding_to_a_missing_role_is_refused_when_the_authorizer_is_built():
    with pytest.raises(ValueError, match="refers to ClusterRole gone"):
        Authorizer([binding(role("gone"), user("alice"))])


# --- the 403 ---------------------------------------------------------------------------------------

def test_a_refused_named_request_names_the_object_the_verb_and_the_namespace():
    request = request_from_http(CONTROLLER, "PATCH", "/api/v1/namespaces/team-a/pods/x", {})
    assert refusal(request).status == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'pods "x" is forbidden: User "system:serviceaccount:gangkeeper:gangkeeper-controller" cannot '
                   'patch resource "pods" in API group "" in the namespace "team-a"',
        "reason": "Forbidden", "details": {"name": "x", "kind": "pods"}, "code": 403}


def test_a_refused_collection_at_the_cluster_scope_has_no_name():
    request = request_from_http(ALICE, "GET", "/apis/gangkeeper.io/v1alpha1/gangs", {"watch": "true"})
    assert refusal(request).status == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'gangs.gangkeeper.io is forbidden: User "alice" cannot watch resource "gangs" in API group '
                   '"gangkeeper.io" at the cluster scope',
        "reason": "Forbidden", "details": {"group": "gangkeeper.io", "kind": "gangs"}, "code": 403}


def test_a_refused_subresource_is_named_with_it_and_a_refused_path_as_a_path():
    status = refusal(request_from_http(ALICE, "PATCH", "/apis/gangkeeper.io/v1alpha1/namespaces/ml/gangs/g/status",
                                       {})).status
    assert status["message"].endswith('cannot patch resource "gangs/status" in API group "gangkeeper.io" in the '
                                      'namespace "ml"')
    assert status["details"] == {"name": "g", "group": "gangkeeper.io", "kind": "gangs"}
    path = refusal(Request(ALICE, "get", path="/metrics")).status
    assert (path["message"], path["details"]) == ('forbidden: User "alice" cannot get path "/metrics"', {})


# --- over HTTP -------------------------------------------------------------------------------------

@pytest.fixture()
def api():
    server = APIServer()
    for name in ("ml", names.DEFAULT_NAMESPACE):
        server.create("namespaces", namespace(name))
    server.create("pods", pod("p"), namespace="ml")
    for lease in (names.CONTROLLER_LEASE, "someone-else"):
        server.create("leases", {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": lease},
                                 "spec": {}}, namespace=names.DEFAULT_NAMESPACE)
    return server


@pytest.fixture()
def deployed(api):
    tokens = {"controller": CONTROLLER, "alice": ALICE, "admin": ADMIN}
    with RunningServer(api, tokens=tokens, authorizer=deployed_rbac()) as running:
        yield running


def call(server: RunningServer, token: str, method: str, path: str, body=None, content_type="application/json"):
    return http(server.url, method, path, body, content_type, {"Authorization": f"Bearer {token}"})


def test_a_user_without_a_grant_is_refused_with_the_real_403_and_the_refusal_is_counted(deployed):
    code, body = call(deployed, "alice", "GET", "/api/v1/pods")
    assert (code, body["reason"]) == (403, "Forbidden")
    assert body["message"] == 'pods is forbidden: User "alice" cannot list resource "pods" in API group "" at the ' \
                              'cluster scope'
    assert call(deployed, "alice", "GET", "/apis")[0] == 200
    assert call(deployed, "admin", "GET", "/api/v1/pods")[0] == 200
    assert deployed.refused() == [Decision("alice", "list", "pods", False)]
    assert deployed.decisions == {Decision("alice", "list", "pods", False): 1,
                                  Decision("alice", "get", "/apis", True): 1,
                                  Decision("kubernetes-admin", "list", "pods", True): 1}


def test_without_an_authorizer_every_authenticated_user_is_allowed(api):
    with RunningServer(api, tokens={"alice": ALICE}) as running:
        assert call(running, "alice", "GET", "/api/v1/pods")[0] == 200
        assert running.refused() == []


def test_the_controller_under_deploys_rbac_lists_pods_everywhere_but_never_reads_secrets(deployed):
    code, body = call(deployed, "controller", "GET", "/api/v1/pods")
    assert code == 200 and [p["metadata"]["name"] for p in body["items"]] == ["p"]
    # Refused before the resource is looked up: the emulation serves no Secrets, a cluster does.
    assert call(deployed, "controller", "GET", "/api/v1/secrets")[0] == 403
    assert call(deployed, "controller", "GET", f"/api/v1/namespaces/{names.DEFAULT_NAMESPACE}/secrets/token")[0] == 403


def test_the_controller_may_renew_its_own_lease_by_merge_patch_and_no_other(deployed):
    leases = f"/apis/coordination.k8s.io/v1/namespaces/{names.DEFAULT_NAMESPACE}/leases"
    renewal = {"spec": {"holderIdentity": "replica-a"}}
    ours = call(deployed, "controller", "PATCH", f"{leases}/{names.CONTROLLER_LEASE}", renewal,
                "application/merge-patch+json")
    theirs = call(deployed, "controller", "PATCH", f"{leases}/someone-else", renewal, "application/merge-patch+json")
    assert ours[0] == 200 and ours[1]["spec"]["holderIdentity"] == "replica-a"
    assert theirs == (403, refusal(request_from_http(CONTROLLER, "PATCH", f"{leases}/someone-else", {})).status)
    assert call(deployed, "controller", "GET", f"{leases}?fieldSelector=metadata.name%3D{names.CONTROLLER_LEASE}")[0] \
        == 200
    assert call(deployed, "controller", "GET", leases)[0] == 403


def test_a_directory_without_rbac_objects_is_refused_by_name(tmp_path):
    """What `sim serve` meets when run from an install without the checkout's deploy/."""
    with pytest.raises(ValueError, match=f"no RBAC objects in {tmp_path}"):
        deployed_rbac(tmp_path)
