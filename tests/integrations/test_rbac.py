"""Every integration's verbs against the controller's RBAC as deploy/default renders it.

The controller watches workloads in every namespace, so what counts is what its ClusterRoles
grant. Each kind's verbs must be granted, and no write that no integration uses: the patch that
suspends and resumes an owner is granted on the kinds that have a suspend switch, and only there.
"""

import pytest

from gangkeeper import integrations, names
from tests.deploy.rendered_manifests import find, of_kind, render

WRITES = frozenset({"create", "update", "patch", "delete", "deletecollection"})
# The controller's own resources, not any workload kind's: members (and evicting lone pods a
# preemption takes, with the budgets protecting them), capacity (nodes, DRA devices and claims, the
# volumes of members' claims), Events, and what asks an autoscaler for capacity (placeholder pods,
# ProvisioningRequests and their PodTemplates).
CORE = {("", "pods"), ("", "pods/eviction"), ("policy", "poddisruptionbudgets"), ("", "nodes"), ("", "events"),
        ("", "persistentvolumeclaims"), ("", "persistentvolumes"),
        *(("resource.k8s.io", resource)
          for resource in ("deviceclasses", "resourceslices", "resourceclaims", "resourceclaimtemplates")),
        (names.PROVISIONING_REQUEST_API[0], names.PROVISIONING_REQUEST_API[2]), ("", "podtemplates")}
WATCHED = [integration for integration in integrations.ALL if integration.resource is not None]


@pytest.fixture(scope="module")
def cluster_rules() -> list[dict]:
    """The rules of every ClusterRole bound to the controller's service account."""
    objects = render("deploy/default")
    rules = []
    for binding in of_kind(objects, "ClusterRoleBinding"):
        if any(subject["kind"] == "ServiceAccount" and subject["name"] == names.CONTROLLER_SERVICE_ACCOUNT
               and subject["namespace"] == names.DEFAULT_NAMESPACE for subject in binding["subjects"]):
            rules += find(objects, "ClusterRole", binding["roleRef"]["name"])["rules"]
    return rules


def granted(rules: list[dict], group: str, resource: str) -> set[str]:
    return {verb for rule in rules if group in rule["apiGroups"] and resource in rule["resources"]
            and not rule.get("resourceNames") for verb in rule["verbs"]}


def needs(integration) -> dict[str, frozenset[str]]:
    """Resource (as RBAC spells it, `gangs/status` for a subresource) → verbs the integration needs."""
    plural = integration.resource.plural
    return {plural: integration.verbs, **({f"{plural}/status": integration.status_verbs}
                                          if integration.status_verbs else {})}


@pytest.mark.parametrize("integration", WATCHED, ids=[i.resource.name for i in WATCHED])
def test_the_controller_may_do_what_each_integration_needs_and_write_nothing_more(cluster_rules, integration):
    for resource, verbs in needs(integration).items():
        allowed = granted(cluster_rules, integration.resource.group, resource)
        assert verbs <= allowed, f"deploy/ does not grant {sorted(verbs - allowed)} on {resource}"
        assert allowed & WRITES <= verbs, f"deploy/ grants {sorted(allowed & WRITES - verbs)} on {resource}, unused"


def test_every_kind_the_controller_may_read_is_an_integrations(cluster_rules):
    """A kind removed from the integrations leaves no grant behind in deploy/."""
    known = CORE | {(i.resource.group, resource) for i in WATCHED for resource in needs(i)}
    pairs = {(group, resource) for rule in cluster_rules for group in rule["apiGroups"] for resource in rule["resources"]}
    assert pairs <= known, sorted(pairs - known)


def test_every_integration_watches_what_it_reads():
    assert all({"list", "watch"} <= integration.verbs for integration in WATCHED)


def test_the_controller_may_evict_pods_and_nothing_else_on_them(cluster_rules):
    assert granted(cluster_rules, "", "pods/eviction") == {"create"}
    assert granted(cluster_rules, "policy", "poddisruptionbudgets") == {"get", "list", "watch"}
