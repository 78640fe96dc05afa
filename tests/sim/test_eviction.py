"""The Eviction API (pods/eviction) and PodDisruptionBudgets, as kube-apiserver v1.36 and the
disruption controller of kube-controller-manager serve them."""

import json

import kubernetes
import kubernetes_validate
import pytest

from sim.api import ADMIN, KUBELET, APIError, User
from sim.apiserver import APIServer
from sim.clock import rfc3339
from sim.cluster import Cluster, emulated_cluster
from sim.disruption import DELETION_TIMEOUT, DisruptionController, scaled
from sim.kubelet import running_status
from sim.names import JOB_NAME_LEGACY_LABEL
from sim.rbac import Authorizer
from sim.server import RunningServer
from sim.spec import load
from tests.sim.helpers import http, namespace, node, pod

NS = "ml"
APP = {"app": "web"}
PDBS = "poddisruptionbudgets"
KUBERNETES = "1.37"  # the newest schemas kubernetes-validate ships
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


# --- builders ------------------------------------------------------------------------------------

@pytest.fixture()
def api(clock):
    server = APIServer(clock=clock.now)
    server.create("namespaces", namespace(NS))
    server.create("nodes", node("n1"))
    return server


@pytest.fixture()
def controller(api, clock):
    """The disruption controller alone on the cluster loop: pods change only as the test says."""
    cluster = Cluster(api, clock, [DisruptionController(api)])
    yield cluster
    cluster.close()


def running(api: APIServer, name: str, *, ready: bool = True, labels: dict = APP, owner: dict | None = None) -> dict:
    """A pod bound to n1 whose kubelet reports it Running, Ready or not."""
    manifest = pod(name, node="n1", labels=labels)
    if owner is not None:
        manifest["metadata"]["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                                    "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                                    "controller": True, "blockOwnerDeletion": True}]
    created = api.create("pods", manifest, namespace=NS)
    status = running_status(created, api.clock(), "172.16.0.2", "10.0.0.2")
    if not ready:
        status["conditions"] = [dict(c, status="False", reason="ContainersNotReady") if c["type"] == "Ready" else c
                                for c in status["conditions"]]
    return api.patch("pods", name, {"status": status}, namespace=NS, subresource="status", user=KUBELET)


def budget(name: str = "web", *, selector: dict | None = None, **spec) -> dict:
    """A policy/v1 PodDisruptionBudget over the `app: web` pods; spec fields by their API names."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"selector": selector if selector is not None else {"matchLabels": APP}, **spec}}


def status_of(api: APIServer, name: str = "web") -> dict:
    return api.get(PDBS, name, namespace=NS)["status"]


def refusal(call) -> dict:
    with pytest.raises(APIError) as error:
        call()
    return error.value.status


def condition(obj: dict, kind: str) -> dict | None:
    return next((c for c in obj["status"].get("conditions") or () if c["type"] == kind), None)


def exists(api: APIServer, name: str) -> bool:
    return any(p["metadata"]["name"] == name for p in api.list("pods", namespace=NS))


def too_many_requests(cause: str, **details) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": VIOLATION,
            "reason": "TooManyRequests", "details": {"causes": [{"reason": "DisruptionBudget", "message": cause}],
                                                      **details}, "code": 429}


SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def granted(username: str, *rules: dict) -> list[dict]:
    """A Role in the namespace with these rules, bound to the user."""
    rbac = "rbac.authorization.k8s.io"
    role = {"apiVersion": f"{rbac}/v1", "kind": "Role", "metadata": {"name": username, "namespace": NS},
            "rules": list(rules)}
    bound = {"apiVersion": f"{rbac}/v1", "kind": "RoleBinding", "metadata": {"name": username, "namespace": NS},
             "roleRef": {"apiGroup": rbac, "kind": "Role", "name": username},
             "subjects": [{"apiGroup": rbac, "kind": "User", "name": username}]}
    return [role, bound]


def rule(verbs: str, resources: str) -> dict:
    return {"apiGroups": [""], "resources": resources.split(), "verbs": verbs.split()}


class Webhook:
    """An in-process webhook that records the reviews it gets and denies every request."""

    def __init__(self):
        self.reviews: list[tuple[str, dict]] = []

    def __call__(self, path: str, review: dict) -> dict:
        self.reviews.append((path, review))
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": review["request"]["uid"], "allowed": False,
                             "status": {"code": 403, "message": "not now"}}}


# --- evicting --------------------------------------------------------------------------------------

def test_a_pod_no_budget_covers_gets_the_disruption_target_condition_and_is_deleted_gracefully(api, clock):
    running(api, "a")
    assert api.evict(NS, "a", grace_period_seconds=5) == SUCCESS
    evicted = api.get("pods", "a", namespace=NS)
    assert evicted["metadata"]["deletionTimestamp"] == rfc3339(clock.now() + 5)
    assert evicted["metadata"]["deletionGracePeriodSeconds"] == 5
    assert condition(evicted, "DisruptionTarget") == {
        "type": "DisruptionTarget", "observedGeneration": 1, "status": "True", "lastProbeTime": None,
        "lastTransitionTime": rfc3339(clock.now()), "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting"}


def test_without_a_grace_period_the_pods_own_applies_and_zero_removes_it_at_once(api):
    running(api, "a")
    running(api, "b")
    api.evict(NS, "a")
    assert api.get("pods", "a", namespace=NS)["metadata"]["deletionGracePeriodSeconds"] == 30
    api.evict(NS, "b", grace_period_seconds=0)
    assert not exists(api, "b")


def test_a_budget_that_allows_a_disruption_is_charged_for_the_evicted_pod(api, clock, controller):
    for name in ("a", "b", "c"):
        running(api, name)
    api.create(PDBS, budget(minAvailable=2), namespace=NS)
    controller.settle()
    assert status_of(api) == {
        "observedGeneration": 1, "disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3,
        "conditions": [{"type": "DisruptionAllowed", "status": "True", "observedGeneration": 1,
                        "lastTransitionTime": rfc3339(clock.now()), "reason": "SufficientPods", "message": ""}]}

    clock.advance(10)
    api.evict(NS, "a", grace_period_seconds=30)
    charged = status_of(api)
    assert (charged["disruptionsAllowed"], charged["disruptedPods"]) == (0, {"a": rfc3339(clock.now())})
    assert condition({"status": charged}, "DisruptionAllowed")["reason"] == "InsufficientPods"

    controller.settle()  # the evicted pod is terminating: no longer healthy, no longer recorded
    settled = status_of(api)
    assert (settled["currentHealthy"], settled["disruptionsAllowed"], "disruptedPods" in settled) == (2, 0, False)


def test_a_budget_that_allows_no_disruption_refuses_with_the_429_upstream_answers(api, controller):
    running(api, "a")
    running(api, "b")
    api.create(PDBS, budget(minAvailable=2), namespace=NS)
    controller.settle()
    assert refusal(lambda: api.evict(NS, "a")) == too_many_requests(
        "The disruption budget web needs 2 healthy pods and has 2 currently")
    assert condition(api.get("pods", "a", namespace=NS), "DisruptionTarget") is None
    assert not api.get("pods", "a", namespace=NS)["metadata"].get("deletionTimestamp")


def test_a_budget_the_controller_has_not_yet_observed_asks_to_retry_after_ten_seconds(api):
    running(api, "a")
    api.create(PDBS, budget(maxUnavailable=1), namespace=NS)
    assert status_of(api) == {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
    assert refusal(lambda: api.evict(NS, "a")) == too_many_requests(
        "The disruption budget web is still being processed by the server.", retryAfterSeconds=10)


def test_a_pod_two_budgets_cover_cannot_be_evicted(api, controller):
    running(api, "a")
    api.create(PDBS, budget("one", minAvailable=0), namespace=NS)
    api.create(PDBS, budget("everything", selector={}, minAvailable=0), namespace=NS)
    controller.settle()
    assert refusal(lambda: api.evict(NS, "a")) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
        "code": 500}


def test_a_budget_without_a_selector_covers_no_pod(api, controller):
    running(api, "a")
    api.create(PDBS, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "none"},
                      "spec": {"minAvailable": 1}}, namespace=NS)
    controller.settle()
    assert status_of(api, "none")["expectedPods"] == 0
    assert api.evict(NS, "a") == SUCCESS


def test_an_unready_pod_goes_without_charging_a_budget_that_is_healthy_enough(api, controller):
    for name in ("a", "b"):
        running(api, name)
    running(api, "sick", ready=False)
    api.create(PDBS, budget(minAvailable=2), namespace=NS)
    controller.settle()
    assert (status_of(api)["currentHealthy"], status_of(api)["disruptionsAllowed"]) == (2, 0)
    assert api.evict(NS, "sick") == SUCCESS
    assert "disruptedPods" not in status_of(api)


def test_an_unready_pod_under_a_short_budget_waits_unless_its_policy_always_allows(api, controller):
    running(api, "a")
    running(api, "sick", ready=False)
    running(api, "ill", ready=False, labels={"app": "api"})
    api.create(PDBS, budget(minAvailable=2), namespace=NS)
    api.create(PDBS, budget("api", selector={"matchLabels": {"app": "api"}}, minAvailable=1,
                            unhealthyPodEvictionPolicy="AlwaysAllow"), namespace=NS)
    controller.settle()
    assert refusal(lambda: api.evict(NS, "sick"))["details"]["causes"][0]["message"] == \
        "The disruption budget web needs 2 healthy pods and has 1 currently"
    assert api.evict(NS, "ill") == SUCCESS
    assert status_of(api, "api")["disruptionsAllowed"] == 0 and "disruptedPods" not in status_of(api, "api")


def test_pods_done_pending_or_terminating_are_deleted_whatever_the_budget_says(api, controller):
    running(api, "done")
    api.patch("pods", "done", {"status": {"phase": "Succeeded"}}, namespace=NS, subresource="status", user=KUBELET)
    api.create("pods", pod("waiting", labels=APP), namespace=NS)
    running(api, "leaving")
    api.delete("pods", "leaving", namespace=NS, grace_period_seconds=60)
    api.create(PDBS, budget(minAvailable=10), namespace=NS)
    controller.settle()
    for name in ("done", "waiting", "leaving"):
        assert api.evict(NS, name, grace_period_seconds=0) == SUCCESS
    assert [p["metadata"]["name"] for p in api.list("pods", namespace=NS)] == []
    assert "disruptedPods" not in status_of(api)


def test_a_missing_pod_is_not_found(api):
    assert refusal(lambda: api.evict(NS, "nobody")) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": 'pods "nobody" not found',
        "reason": "NotFound", "details": {"name": "nobody", "kind": "pods"}, "code": 404}


def test_a_dry_run_answers_as_the_eviction_would_and_changes_nothing(api, controller):
    for name in ("a", "b"):
        running(api, name)
    api.create(PDBS, budget(minAvailable=1), namespace=NS)
    controller.settle()
    before = (api.get("pods", "a", namespace=NS), status_of(api))
    dry = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a", "namespace": NS},
           "deleteOptions": {"dryRun": ["All"]}}
    assert api.create_eviction(NS, "a", dry) == SUCCESS
    assert (api.get("pods", "a", namespace=NS), status_of(api)) == before


def test_an_eviction_for_another_pod_or_a_failed_precondition_is_refused(api):
    running(api, "a")
    other = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "b"}}
    assert refusal(lambda: api.create_eviction(NS, "a", other))["message"] == \
        "name in URL does not match name in Eviction object"
    stale = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a"},
             "deleteOptions": {"preconditions": {"uid": "someone-else"}}}
    uid = api.get("pods", "a", namespace=NS)["metadata"]["uid"]
    assert refusal(lambda: api.create_eviction(NS, "a", stale)) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f'Operation cannot be fulfilled on Pod "a": the UID in the precondition (someone-else) does not '
                   f'match the UID in record ({uid}). The object might have been deleted and then recreated',
        "reason": "Conflict", "details": {"name": "a", "kind": "Pod"}, "code": 409}


def test_admission_sees_a_create_of_pods_eviction_with_the_eviction():
    webhook = Webhook()
    api = APIServer(webhook_services={"webhook.gangkeeper.svc:443": webhook})
    api.create("namespaces", namespace(NS))
    api.create("nodes", node("n1"))
    api.create("validatingwebhookconfigurations", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "evictions"},
        "webhooks": [{"name": "evictions.test", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                      "clientConfig": {"service": {"name": "webhook", "namespace": "gangkeeper", "path": "/evict"}},
                      "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                 "resources": ["pods/eviction"]}]}]})
    running(api, "a")
    assert refusal(lambda: api.evict(NS, "a"))["code"] == 403
    [(path, review)] = webhook.reviews
    request = review["request"]
    assert (path, request["operation"], request["subResource"], request["name"]) == ("/evict", "CREATE", "eviction", "a")
    assert request["kind"] == {"group": "policy", "version": "v1", "kind": "Eviction"}
    assert request["object"]["kind"] == "Eviction" and request["object"]["metadata"]["name"] == "a"
    assert not api.get("pods", "a", namespace=NS)["metadata"].get("deletionTimestamp")


# --- the disruption controller ----------------------------------------------------------------------

def test_the_controller_keeps_the_status_as_pods_come_and_go(api, clock, controller):
    api.create(PDBS, budget(minAvailable=2), namespace=NS)
    controller.settle()
    counts = ("expectedPods", "currentHealthy", "desiredHealthy", "disruptionsAllowed")

    def seen():
        controller.settle()
        status = status_of(api)
        return tuple(status[k] for k in counts), condition({"status": status}, "DisruptionAllowed")["reason"]

    assert seen() == ((0, 0, 2, 0), "InsufficientPods")
    for name in ("a", "b", "c"):
        running(api, name)
    assert seen() == ((3, 3, 2, 1), "SufficientPods")
    api.patch("pods", "c", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}, namespace=NS,
              subresource="status", user=KUBELET)
    assert seen() == ((3, 2, 2, 0), "InsufficientPods")
    api.delete("pods", "c", namespace=NS, grace_period_seconds=0)
    running(api, "d")
    assert seen() == ((3, 3, 2, 1), "SufficientPods")
    api.patch(PDBS, "web", {"spec": {"minAvailable": 1}}, namespace=NS)
    assert seen() == ((3, 3, 1, 2), "SufficientPods")
    assert status_of(api)["observedGeneration"] == 2


def test_an_eviction_whose_pod_was_not_deleted_stops_counting_after_two_minutes(api, clock, controller):
    for name in ("a", "b"):
        running(api, name)
    api.create(PDBS, budget(minAvailable=1), namespace=NS)
    controller.settle()
    recorded = dict(status_of(api), disruptedPods={"a": rfc3339(clock.now())}, disruptionsAllowed=0)
    api.patch(PDBS, "web", {"status": recorded}, namespace=NS, subresource="status")
    controller.settle()
    assert (status_of(api)["currentHealthy"], status_of(api)["disruptedPods"]) == (1, {"a": rfc3339(clock.now())})
    assert controller.next_due() == clock.now() + DELETION_TIMEOUT
    controller.run_until(clock.now() + DELETION_TIMEOUT)
    assert (status_of(api)["currentHealthy"], status_of(api)["disruptionsAllowed"]) == (2, 1)
    assert "disruptedPods" not in status_of(api)


def test_percentages_are_of_the_controllers_replicas_rounded_up(api, controller):
    assert (scaled("50%", 3), scaled("34%", 3), scaled("0%", 3), scaled(2, 3)) == (2, 2, 0, 2)
    job = api.create("pytorchjobs", {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt"},
                                     "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1},
                                                                      "Worker": {"replicas": 3}}}}, namespace=NS)
    for name in ("pt-master-0", "pt-worker-0", "pt-worker-1", "pt-worker-2"):
        running(api, name, owner=job)
    api.create(PDBS, budget("half", minAvailable="50%"), namespace=NS)
    api.create(PDBS, budget("third", maxUnavailable="34%"), namespace=NS)
    controller.settle()
    # The scale of a PyTorchJob is its Worker replicas: the Master is selected and healthy, not expected.
    half, third = status_of(api, "half"), status_of(api, "third")
    assert (half["expectedPods"], half["desiredHealthy"], half["currentHealthy"], half["disruptionsAllowed"]) == \
        (3, 2, 4, 2)
    assert (third["expectedPods"], third["desiredHealthy"], third["disruptionsAllowed"]) == (3, 1, 3)


def test_a_percentage_over_job_pods_fails_the_sync_so_evictions_wait(api, controller):
    job = api.create("jobs", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
                              "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}],
                                                             "restartPolicy": "Never"}}}}, namespace=NS)
    running(api, "train-abcde", owner=job)
    api.create(PDBS, budget(minAvailable="50%"), namespace=NS)
    controller.settle()
    status = status_of(api)
    assert status["disruptionsAllowed"] == 0 and "observedGeneration" not in status
    failed = condition({"status": status}, "DisruptionAllowed")
    assert (failed["status"], failed["reason"], failed["message"]) == (
        "False", "SyncFailed", "jobs.batch does not implement the scale subresource")
    assert refusal(lambda: api.evict(NS, "train-abcde"))["details"]["causes"][0]["message"] == \
        "The disruption budget web is still being processed by the server."


def test_bare_pods_under_max_unavailable_are_unmanaged_so_nothing_is_expected_or_allowed(api, controller):
    for name in ("a", "b"):
        running(api, name)
    api.create(PDBS, budget(maxUnavailable=1), namespace=NS)
    controller.settle()
    status = status_of(api)
    assert (status["expectedPods"], status["currentHealthy"], status["disruptionsAllowed"]) == (0, 2, 0)
    assert refusal(lambda: api.evict(NS, "a"))["details"]["causes"][0]["message"] == \
        "The disruption budget web does not allow evicting pods currently"


def test_an_evicted_job_pod_is_replaced_and_the_budget_recovers_on_the_emulated_cluster(clock):
    api = APIServer(clock=clock.now)
    api.create("namespaces", namespace(NS))
    cluster = emulated_cluster(api, clock, spec=load("nodes: [{count: 1}]"))
    template = {"spec": {"containers": [{"name": "c", "image": "busybox:1.36", "resources": {"limits": {"cpu": "1"}}}],
                         "restartPolicy": "Never"}}
    api.create("jobs", {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "serve"},
                        "spec": {"parallelism": 3, "completions": 3, "template": template}}, namespace=NS)
    api.create(PDBS, budget(selector={"matchLabels": {JOB_NAME_LEGACY_LABEL: "serve"}}, minAvailable=2), namespace=NS)
    cluster.run_until(clock.now() + 10)
    assert status_of(api)["disruptionsAllowed"] == 1
    victim = api.list("pods", namespace=NS)[0]["metadata"]["name"]
    api.evict(NS, victim)
    cluster.run_until(clock.now() + 1)
    assert status_of(api)["disruptionsAllowed"] == 0
    cluster.run_until(clock.now() + 10)
    assert not exists(api, victim)
    status = status_of(api)
    assert (status["expectedPods"], status["currentHealthy"], status["disruptionsAllowed"]) == (3, 3, 1)
    cluster.close()


# --- validation --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("spec", "message"), [
    ({"minAvailable": 1, "maxUnavailable": 1},
     'spec: Invalid value: {"selector":{"matchLabels":{"app":"web"}},"minAvailable":1,"maxUnavailable":1}: '
     'minAvailable and maxUnavailable cannot be both set'),
    ({"minAvailable": -1}, "spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"),
    ({"maxUnavailable": "half"}, "spec.maxUnavailable: Invalid value: \"half\": a valid percent string must be a "
                                 "numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for "
                                 "validation is '[0-9]+%')"),
    ({"minAvailable": "120%"}, 'spec.minAvailable: Invalid value: "120%": must not be greater than 100%'),
    ({"minAvailable": 1, "unhealthyPodEvictionPolicy": "Sometimes"},
     'spec.unhealthyPodEvictionPolicy: Unsupported value: "Sometimes": supported values: "AlwaysAllow", '
     '"IfHealthyBudget"'),
])
def test_budgets_are_validated_as_the_real_server_does(api, spec, message):
    answer = refusal(lambda: api.create(PDBS, budget(**spec), namespace=NS))
    assert (answer["code"], answer["message"]) == (422, f'PodDisruptionBudget.policy "web" is invalid: {message}')


def test_a_status_with_a_negative_count_is_refused(api):
    api.create(PDBS, budget(minAvailable=1), namespace=NS)
    answer = refusal(lambda: api.patch(PDBS, "web", {"status": {"disruptionsAllowed": -1}}, namespace=NS,
                                       subresource="status"))
    assert answer["message"] == 'PodDisruptionBudget.policy "web" is invalid: status.disruptionsAllowed: ' \
                                'Invalid value: -1: must be greater than or equal to 0'


# --- over HTTP ---------------------------------------------------------------------------------------

def test_the_official_client_evicts_and_is_refused_as_by_a_real_server(api, controller):
    for name in ("a", "b"):
        running(api, name)
    with RunningServer(api, tokens={"admin": ADMIN}) as served:
        config = kubernetes.client.Configuration()
        config.host, config.api_key = served.url, {"authorization": "Bearer admin"}
        client = kubernetes.client.ApiClient(config)
        core, policy = kubernetes.client.CoreV1Api(client), kubernetes.client.PolicyV1Api(client)
        policy.create_namespaced_pod_disruption_budget(NS, budget(minAvailable=1))
        controller.settle()
        assert policy.read_namespaced_pod_disruption_budget("web", NS).status.disruptions_allowed == 1

        def evict(name: str):
            return core.create_namespaced_pod_eviction(name, NS, kubernetes.client.V1Eviction(
                metadata=kubernetes.client.V1ObjectMeta(name=name, namespace=NS),
                delete_options=kubernetes.client.V1DeleteOptions(grace_period_seconds=0)))

        evict("a")
        assert [p.metadata.name for p in core.list_namespaced_pod(NS).items] == ["b"]
        assert list(policy.read_namespaced_pod_disruption_budget("web", NS).status.disrupted_pods) == ["a"]
        controller.settle()
        with pytest.raises(kubernetes.client.ApiException) as refused:
            evict("b")
        assert refused.value.status == 429
        assert json.loads(refused.value.body) == too_many_requests(
            "The disruption budget web needs 1 healthy pods and has 1 currently")
        resources = {r.name: r for r in core.get_api_resources().resources}
        assert (resources["pods/eviction"].group, resources["pods/eviction"].version,
                resources["pods/eviction"].kind, resources["pods/eviction"].verbs) == ("policy", "v1", "Eviction",
                                                                                       ["create"])
        assert http(served.url, "GET", f"/api/v1/namespaces/{NS}/pods/b/eviction",
                    headers={"Authorization": "Bearer admin"})[0] == 405


def test_a_budget_not_yet_observed_sends_retry_after_over_http(api):
    running(api, "a")
    api.create(PDBS, budget(minAvailable=1), namespace=NS)
    with RunningServer(api, tokens={"admin": ADMIN}) as served:
        config = kubernetes.client.Configuration()
        config.host, config.api_key = served.url, {"authorization": "Bearer admin"}
        core = kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(config))
        with pytest.raises(kubernetes.client.ApiException) as refused:
            core.create_namespaced_pod_eviction("a", NS, {"metadata": {"name": "a", "namespace": NS}})
    assert (refused.value.status, refused.value.headers["Retry-After"]) == (429, "10")


def test_rbac_grants_eviction_as_create_on_pods_eviction(api):
    running(api, "a")
    running(api, "b")
    authorizer = Authorizer(granted("bob", rule("get list watch", "pods")) +
                            granted("carol", rule("get list", "pods"), rule("create", "pods/eviction")))
    tokens = {"bob": User("bob"), "carol": User("carol")}
    path = f"/api/v1/namespaces/{NS}/pods/a/eviction"
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a", "namespace": NS}}
    with RunningServer(api, tokens=tokens, authorizer=authorizer) as served:
        code, answer = http(served.url, "POST", path, body, headers={"Authorization": "Bearer bob"})
        assert (code, answer["message"], answer["details"]) == (
            403, 'pods "a" is forbidden: User "bob" cannot create resource "pods/eviction" in API group "" in the '
                 f'namespace "{NS}"', {"name": "a", "kind": "pods"})
        assert exists(api, "a")
        assert http(served.url, "POST", path, body, headers={"Authorization": "Bearer carol"}) == (201, SUCCESS)


def test_served_budgets_and_evicted_pods_are_valid_by_the_api_schema_and_the_clients_models(api, controller):
    for name in ("a", "b"):
        running(api, name)
    api.create(PDBS, budget(minAvailable=1, unhealthyPodEvictionPolicy="IfHealthyBudget"), namespace=NS)
    api.create(PDBS, budget("api", selector={"matchExpressions": [{"key": "app", "operator": "In", "values": ["api"]}]},
                            maxUnavailable="10%"), namespace=NS)
    controller.settle()
    api.evict(NS, "a")
    with RunningServer(api) as served:
        _, budgets = http(served.url, "GET", f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets")
        _, pods = http(served.url, "GET", f"/api/v1/namespaces/{NS}/pods")
    listed = kubernetes.client.ApiClient().deserialize(json.dumps(budgets), "V1PodDisruptionBudgetList",
                                                       "application/json")
    assert [b.metadata.name for b in listed.items] == ["api", "web"]
    for item in budgets["items"]:
        obj = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", **item}
        assert kubernetes_validate.validate(obj, KUBERNETES, strict=True) == KUBERNETES
    [evicted] = [p for p in pods["items"] if p["metadata"]["name"] == "a"]
    assert kubernetes_validate.validate({"apiVersion": "v1", "kind": "Pod", **evicted}, KUBERNETES, strict=True)
