"""What the manifests promise, checked on the rendered objects: least privilege, hardened pods,
a webhook that fails closed only where it was asked to, and names that agree with the code."""

import json
from importlib.metadata import version

import pytest

from gangkeeper import names
from gangkeeper.certs.issue import service_dns_names
from sim.rbac import DEPLOY_BASE, RBAC_KINDS, load_manifests
from tests.deploy.rendered_manifests import find, of_kind

WEBHOOK_SA = "gangkeeper-webhook"
CONTROLLER_SA = names.CONTROLLER_SERVICE_ACCOUNT
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob")


def _pod_spec(workload):
    return workload["spec"]["template"]["spec"]


def _containers(workload):
    spec = _pod_spec(workload)
    return spec.get("initContainers", []) + spec["containers"]


def _rules_bound_to(objects, service_account):
    """Every RBAC rule granted to the service account, through any (Cluster)RoleBinding."""
    rules = []
    for binding in of_kind(objects, "RoleBinding", "ClusterRoleBinding"):
        if any(s["kind"] == "ServiceAccount" and s["name"] == service_account
               and s["namespace"] == names.DEFAULT_NAMESPACE for s in binding["subjects"]):
            role = find(objects, binding["roleRef"]["kind"], binding["roleRef"]["name"])
            rules += role["rules"]
    return rules


def _grants(rules, group, resource):
    return {verb for r in rules if group in r["apiGroups"] and resource in r["resources"] for verb in r["verbs"]}


# --- RBAC --------------------------------------------------------------------------------------

def test_no_role_uses_a_wildcard(rendered):
    for role in of_kind(rendered, "Role", "ClusterRole"):
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                assert not any("*" in value for value in rule.get(field, [])), (role["metadata"]["name"], rule)


def test_the_controller_cannot_touch_secrets(rendered):
    rules = _rules_bound_to(rendered, CONTROLLER_SA)
    assert rules
    assert not any("secrets" in r["resources"] for r in rules)


def test_the_webhook_has_no_api_access_at_all(rendered):
    assert _rules_bound_to(rendered, WEBHOOK_SA) == []
    assert find(rendered, "ServiceAccount", WEBHOOK_SA)["automountServiceAccountToken"] is False
    pod = _pod_spec(find(rendered, "Deployment", "gangkeeper-webhook"))
    assert pod["serviceAccountName"] == WEBHOOK_SA and pod["automountServiceAccountToken"] is False


@pytest.mark.parametrize(("group", "resource", "verbs"), [
    ("", "pods", {"get", "list", "watch", "create", "patch", "delete"}),
    ("", "podtemplates", {"get", "list", "watch", "create", "delete"}),
    (names.PROVISIONING_REQUEST_API[0], names.PROVISIONING_REQUEST_API[2], {"get", "list", "watch", "create", "delete"}),
    ("scheduling.k8s.io", "priorityclasses", set()),
    ("", "nodes", {"get", "list", "watch"}),
    ("", "namespaces", set()),
    ("", "events", {"create", "patch"}),
    (names.GANG_GROUP, names.GANG_PLURAL, {"get", "list", "watch", "create", "delete"}),
    (names.GANG_GROUP, f"{names.GANG_PLURAL}/status", {"patch"}),
    (names.PYTORCHJOB_API[0], names.PYTORCHJOB_API[2], {"get", "list", "watch", "patch"}),
    (names.JOBSET_API[0], names.JOBSET_API[2], {"get", "list", "watch", "patch"}),
    ("batch", "jobs", {"get", "list", "watch", "patch"}),
    *(("resource.k8s.io", resource, {"get", "list", "watch"})
      for resource in ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")),
    ("", "persistentvolumeclaims", {"get", "list", "watch"}),
    ("", "persistentvolumes", {"get", "list", "watch"}),
    (names.NATIVE_POD_GROUP_API[0], names.NATIVE_POD_GROUP_API[2], {"get", "list", "watch"}),
    (names.PLUGINS_POD_GROUP_API[0], names.PLUGINS_POD_GROUP_API[2], {"get", "list", "watch"}),
    (names.VOLCANO_POD_GROUP_API[0], names.VOLCANO_POD_GROUP_API[2], {"get", "list", "watch"}),
])
def test_the_controller_gets_exactly_what_it_needs_cluster_wide(default, group, resource, verbs):
    assert _grants(find(default, "ClusterRole", CONTROLLER_SA)["rules"], group, resource) == verbs


def test_the_emulation_enforces_the_rbac_deploy_default_renders(default):
    """The end-to-end runs read RBAC from deploy/base without kubectl (sim.rbac.deployed_rbac): that
    is only deploy/'s RBAC while the kustomizations rename and re-namespace none of it."""
    def identity(obj):
        return obj["kind"], obj["metadata"]["name"], obj["metadata"].get("namespace"), \
            json.dumps({k: v for k, v in obj.items() if k != "metadata"}, sort_keys=True)

    rendered = of_kind(default, *RBAC_KINDS)
    assert rendered and sorted(map(identity, load_manifests(DEPLOY_BASE))) == sorted(map(identity, rendered))


def test_leader_election_is_limited_to_our_namespace_and_lease(default):
    role = find(default, "Role", "gangkeeper-controller-leader-election")
    assert role["metadata"]["namespace"] == names.DEFAULT_NAMESPACE
    assert _grants(role["rules"], "coordination.k8s.io", "leases") == {"get", "list", "watch", "create", "patch"}
    assert not _grants(find(default, "ClusterRole", CONTROLLER_SA)["rules"], "coordination.k8s.io", "leases")


# --- pods --------------------------------------------------------------------------------------

def test_every_container_is_non_root_read_only_and_unprivileged(rendered):
    workloads = of_kind(rendered, *WORKLOADS)
    assert {w["metadata"]["name"] for w in workloads} == {"gangkeeper-webhook", "gangkeeper-controller"}
    for workload in workloads:
        pod = _pod_spec(workload)
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert "priorityClassName" not in pod
        for container in _containers(workload):
            context = container["securityContext"]
            assert context["runAsNonRoot"] is True and context["runAsUser"] == 65532
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert container["resources"]["requests"] and container["resources"]["limits"]


def test_webhook_runs_two_replicas_on_different_nodes_behind_a_budget(rendered):
    deployment = find(rendered, "Deployment", "gangkeeper-webhook")
    assert deployment["spec"]["replicas"] == 2
    spread = _pod_spec(deployment)["topologySpreadConstraints"]
    assert any(c["topologyKey"] == "kubernetes.io/hostname" and c["whenUnsatisfiable"] == "DoNotSchedule"
               for c in spread)
    budget = find(rendered, "PodDisruptionBudget", "gangkeeper-webhook")
    assert budget["spec"]["minAvailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


def test_webhook_container_serves_https_with_the_mounted_certificates(rendered):
    deployment = find(rendered, "Deployment", "gangkeeper-webhook")
    (container,) = _pod_spec(deployment)["containers"]
    assert container["command"] + container["args"] == [
        "gangkeeper", "webhook", "--port", "9443", "--cert-dir", "/etc/gangkeeper/tls"]
    assert container["ports"] == [{"name": "https", "containerPort": 9443, "protocol": "TCP"}]
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert container[probe]["httpGet"] == {"path": path, "port": "https", "scheme": "HTTPS"}
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in _pod_spec(deployment)["volumes"]}
    assert volumes[mounts["/etc/gangkeeper/tls"]]["secret"]["secretName"] == names.WEBHOOK_TLS_SECRET
    assert "emptyDir" in volumes[mounts["/tmp"]]


def test_controller_container_args_ports_and_probes(rendered):
    deployment = find(rendered, "Deployment", "gangkeeper-controller")
    assert deployment["spec"]["replicas"] == 2
    (container,) = _pod_spec(deployment)["containers"]
    assert container["command"] + container["args"] == ["gangkeeper", "controller"]
    assert {"name": "GANGKEEPER_CAPACITY_PROVISIONING", "value": "None"} in container["env"], "opt-in only"
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"health": 8081, "metrics": 8080}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert _pod_spec(deployment)["serviceAccountName"] == CONTROLLER_SA


def test_the_image_tag_follows_the_package_version(default):
    for workload in of_kind(default, *WORKLOADS):
        for container in _containers(workload):
            assert container["image"] == f"gangkeeper:{version('gangkeeper')}"


def test_everything_namespaced_lives_in_our_namespace(rendered):
    cluster_scoped = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "PriorityClass",
                      "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
    for obj in rendered:
        assert obj["metadata"].get("namespace") == (None if obj["kind"] in cluster_scoped else names.DEFAULT_NAMESPACE)


def test_placeholders_have_a_negative_priority_and_preempt_nothing(rendered):
    """Every real pod preempts a placeholder, and a placeholder never preempts anything."""
    priority_class = find(rendered, "PriorityClass", names.PLACEHOLDER_PRIORITY_CLASS)
    assert (priority_class["value"], priority_class["preemptionPolicy"], priority_class["globalDefault"]) == (
        names.PLACEHOLDER_PRIORITY, "Never", False)
    assert names.PLACEHOLDER_PRIORITY < 0 and "placeholder" in priority_class["description"]
    assert [o["metadata"]["name"] for o in of_kind(rendered, "PriorityClass")] == [names.PLACEHOLDER_PRIORITY_CLASS]


# --- webhook configurations ----------------------------------------------------------------------

def _webhooks(objects):
    mutating = find(objects, "MutatingWebhookConfiguration", names.WEBHOOK_CONFIGURATION)
    validating = find(objects, "ValidatingWebhookConfiguration", names.WEBHOOK_CONFIGURATION)
    return mutating["webhooks"], validating["webhooks"]


def test_webhooks_fail_closed_only_in_opted_in_namespaces(rendered):
    mutating, validating = _webhooks(rendered)
    for webhook in mutating + validating:
        assert webhook["failurePolicy"] == "Fail"
        assert webhook["sideEffects"] == "None"
        assert webhook["admissionReviewVersions"] == ["v1"]
        assert webhook["timeoutSeconds"] == 5 and webhook["matchPolicy"] == "Equivalent"
        expressions = {e["key"]: e for e in webhook["namespaceSelector"]["matchExpressions"]}
        assert expressions[names.ENFORCE_LABEL] == {
            "key": names.ENFORCE_LABEL, "operator": "In", "values": [names.ENFORCE_VALUE]}
        excluded = expressions["kubernetes.io/metadata.name"]
        assert excluded["operator"] == "NotIn"
        assert set(excluded["values"]) >= names.NEVER_ENFORCED_NAMESPACES | {names.DEFAULT_NAMESPACE}
        service = webhook["clientConfig"]["service"]
        assert (service["name"], service["namespace"], service["port"]) == (
            names.WEBHOOK_SERVICE, names.DEFAULT_NAMESPACE, 443)


def test_webhook_names_paths_and_rules(rendered):
    (mutate,), (validate,) = _webhooks(rendered)
    assert (mutate["name"], mutate["clientConfig"]["service"]["path"]) == (f"mutate.{names.DOMAIN}", "/mutate")
    assert mutate["reinvocationPolicy"] == "IfNeeded"
    assert [(r["apiGroups"], r["resources"], r["operations"]) for r in mutate["rules"]] == [
        ([""], ["pods"], ["CREATE"])]
    assert (validate["name"], validate["clientConfig"]["service"]["path"]) == (f"validate.{names.DOMAIN}", "/validate")
    assert [(r["apiGroups"], r["apiVersions"], r["resources"], r["operations"]) for r in validate["rules"]] == [
        ([""], ["v1"], ["pods"], ["CREATE", "UPDATE"]),
        ([names.GANG_GROUP], [names.GANG_VERSION], [names.GANG_PLURAL, f"{names.GANG_PLURAL}/status"],
         ["CREATE", "UPDATE"]),
    ]


def test_service_sends_443_to_the_webhook_port(rendered):
    service = find(rendered, "Service", names.WEBHOOK_SERVICE)
    deployment = find(rendered, "Deployment", "gangkeeper-webhook")
    assert service["spec"]["ports"] == [{"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_no_ca_bundle_is_baked_into_the_manifests(rendered):
    mutating, validating = _webhooks(rendered)
    assert not any("caBundle" in w["clientConfig"] for w in mutating + validating)


# --- cert-manager overlay ------------------------------------------------------------------------

def test_cert_manager_issues_the_secret_the_webhook_mounts_and_injects_its_ca(cert_manager):
    certificate = find(cert_manager, "Certificate", "gangkeeper-webhook")
    issuer = find(cert_manager, "Issuer", certificate["spec"]["issuerRef"]["name"])
    assert issuer["spec"] == {"selfSigned": {}}
    assert certificate["spec"]["secretName"] == names.WEBHOOK_TLS_SECRET
    assert certificate["spec"]["dnsNames"] == list(service_dns_names(names.WEBHOOK_SERVICE, names.DEFAULT_NAMESPACE))
    assert certificate["spec"]["privateKey"]["algorithm"] == "ECDSA"
    source = f"{names.DEFAULT_NAMESPACE}/{certificate['metadata']['name']}"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        configuration = find(cert_manager, kind, names.WEBHOOK_CONFIGURATION)
        assert configuration["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == source


def test_default_does_not_depend_on_cert_manager(default):
    assert not [o for o in default if o["apiVersion"].startswith("cert-manager.io/")]
    for obj in default:
        assert "cert-manager.io/inject-ca-from" not in obj["metadata"].get("annotations", {})
