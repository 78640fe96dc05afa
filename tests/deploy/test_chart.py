"""The Helm chart (charts/gangkeeper) installs what deploy/ installs.

Rendered by Helm itself (Helm's Go SDK, bundled by the helm-python-sdk wheel; no helm binary, no
cluster, no network), with its default values the chart's objects are those of
`kubectl kustomize deploy/default`, and with `certificates.source=cert-manager` those of
deploy/overlays/cert-manager: the same set, and each object equal to its counterpart, field for
field. Nothing is normalised away: the chart adds no labels or annotations of Helm's own, so only
the order of objects and of keys may differ. A change to deploy/ that the chart does not follow
(or the reverse) fails here.

The CRD is the one object the chart cannot template (Helm installs `crds/` verbatim, and never
upgrades or deletes it): charts/gangkeeper/crds/gangs.yaml is kustomize's rendering of
deploy/base/crd-gangs.yaml. After changing that file, refresh the chart's copy with
`.venv/bin/python -m tests.deploy.test_chart`.
"""

import configparser
import difflib
import subprocess
import sys

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from gangkeeper import names
from tests.deploy.rendered_manifests import (
    CHART,
    KUBECTL,
    OTHER_NAMESPACE,
    REPO,
    find,
    of_kind,
    render_chart,
    render_with,
)

CRD_COPY = CHART / "crds" / "gangs.yaml"
CRD_HEADER = """\
# The Gang CRD as `kubectl kustomize deploy/default` renders deploy/base/crd-gangs.yaml: do not edit
# here. Refresh it with `.venv/bin/python -m tests.deploy.test_chart` (tests/deploy/test_chart.py
# fails while the two differ). Helm installs this file on `helm install` only: before a
# `helm upgrade`, apply it yourself (`helm show crds ... | kubectl apply --server-side -f -`;
# docs/operations.md, "Upgrade and uninstall"); `helm uninstall` never deletes it.
"""
CERT_MANAGER = {"certificates": {"source": "cert-manager"}}


def _key(obj: dict) -> tuple:
    return obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def _by_key(objects: list[dict]) -> dict[tuple, dict]:
    keyed = {_key(obj): obj for obj in objects}
    assert len(keyed) == len(objects), "two objects with the same apiVersion, kind, namespace and name"
    return keyed


def _dump(obj: dict) -> list[str]:
    return yaml.safe_dump(obj, sort_keys=True).splitlines()


def assert_same_objects(chart: list[dict], kustomize: list[dict], what: str) -> None:
    ours, theirs = _by_key(chart), _by_key(kustomize)
    only_chart = sorted(set(ours) - set(theirs))
    only_kustomize = sorted(set(theirs) - set(ours))
    assert not only_chart and not only_kustomize, (
        f"{what}: objects only the chart renders: {only_chart}; only kustomize: {only_kustomize}")
    diffs = []
    for key in sorted(ours):
        if ours[key] != theirs[key]:
            diff = difflib.unified_diff(_dump(theirs[key]), _dump(ours[key]), "kustomize", "chart", lineterm="")
            diffs.append(f"{' '.join(key)}:\n" + "\n".join(diff))
    assert not diffs, f"{what}: the chart differs from kustomize:\n" + "\n\n".join(diffs)


@pytest.fixture(scope="module")
def chart_default() -> list[dict]:
    return render_chart()


# --- the chart ≡ deploy/ -------------------------------------------------------------------------

def test_the_crd_copy_is_kustomizes_rendering(default):
    crd = find(default, "CustomResourceDefinition", "gangs.gangkeeper.io")
    copy = yaml.safe_load(CRD_COPY.read_text())
    assert copy == crd, ("charts/gangkeeper/crds/gangs.yaml differs from deploy/base/crd-gangs.yaml: "
                         "refresh it with `.venv/bin/python -m tests.deploy.test_chart`")


def test_default_values_render_deploy_default(chart_default, default):
    assert_same_objects(chart_default, default, "default values vs deploy/default")


def test_cert_manager_renders_the_cert_manager_overlay(cert_manager):
    assert_same_objects(render_chart(CERT_MANAGER), cert_manager,
                        "certificates.source=cert-manager vs deploy/overlays/cert-manager")


@pytest.mark.parametrize("mode, component", [("ProvisioningRequest", "deploy/components/provisioning-request"),
                                             ("Placeholders", "deploy/components/placeholders")])
def test_capacity_provisioning_renders_its_component(tmp_path, mode, component):
    assert_same_objects(render_chart({"controller": {"capacityProvisioning": mode}}),
                        render_with(tmp_path, "deploy/default", component),
                        f"controller.capacityProvisioning={mode} vs deploy/default with {component}")


def test_the_app_version_is_the_package_version_and_deploys_image_tag():
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    package_version = setup["metadata"]["version"]
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    kustomization = yaml.safe_load((REPO / "deploy" / "default" / "kustomization.yaml").read_text())
    assert chart["appVersion"] == package_version
    assert kustomization["images"] == [{"name": "gangkeeper", "newName": "gangkeeper", "newTag": package_version}]


# --- helm lint ----------------------------------------------------------------------------------

@pytest.mark.parametrize("values", [None, CERT_MANAGER, {"namespace": {"name": OTHER_NAMESPACE}}],
                         ids=["default", "cert-manager", "other-namespace"])
def test_helm_lint_finds_nothing(values):
    report = helm.lint(CHART, values, strict=True)
    assert report["total_charts_linted"] == 1
    findings = [m for m in report["messages"] if m["severity"] >= 2]  # warnings and errors; 1 is info
    assert not findings and not report["errors"], report


def test_the_packaged_chart_renders_the_same(tmp_path, chart_default):
    archive = helm.package(CHART, destination=tmp_path)
    with helm.Chart.load(archive) as packaged:
        assert packaged.version == packaged.metadata["version"]
        manifests = packaged.render(name="gangkeeper", namespace="default")
        crds = packaged.crds
    objects = [doc for path, text in manifests.items() if not path.endswith(".txt")
               for doc in yaml.safe_load_all(text) if doc]
    objects += [doc for crd in crds for doc in yaml.safe_load_all(crd["data"]) if doc]
    assert_same_objects(objects, chart_default, "packaged vs chart directory")


# --- what teams change --------------------------------------------------------------------------

def test_another_namespace_moves_everything_and_tells_the_commands(default):
    objects = render_chart({"namespace": {"name": OTHER_NAMESPACE}})
    assert find(objects, "Namespace", OTHER_NAMESPACE)["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] \
        == "restricted"
    namespaced = [o for o in objects if o["kind"] not in (
        "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "PriorityClass",
        "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")]
    assert len(namespaced) == len([o for o in default if "namespace" in o["metadata"]])
    assert {o["metadata"]["namespace"] for o in namespaced} == {OTHER_NAMESPACE}
    for binding in of_kind(objects, "RoleBinding", "ClusterRoleBinding"):
        assert {s["namespace"] for s in binding["subjects"]} == {OTHER_NAMESPACE}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for webhook in find(objects, kind, names.WEBHOOK_CONFIGURATION)["webhooks"]:
            assert webhook["clientConfig"]["service"]["namespace"] == OTHER_NAMESPACE
            never = [e for e in webhook["namespaceSelector"]["matchExpressions"] if e["operator"] == "NotIn"]
            assert never == [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                              "values": ["kube-system", OTHER_NAMESPACE]}]
    webhook_args = _container(objects, "gangkeeper-webhook")["args"]
    assert f"--controller-username=system:serviceaccount:{OTHER_NAMESPACE}:{names.CONTROLLER_SERVICE_ACCOUNT}" \
        in webhook_args
    assert f"--excluded-namespaces={OTHER_NAMESPACE}" in webhook_args
    assert _container(objects, "gangkeeper-controller")["args"] == ["controller", f"--lease-namespace={OTHER_NAMESPACE}"]
    text = yaml.safe_dump_all(o for o in objects if o["kind"] != "CustomResourceDefinition")
    assert "namespace: gangkeeper" not in text and "gangkeeper:gangkeeper" not in text


def test_an_existing_namespace_is_not_created():
    objects = render_chart({"namespace": {"name": OTHER_NAMESPACE, "create": False}})
    assert of_kind(objects, "Namespace") == []


def _container(objects, deployment):
    return find(objects, "Deployment", deployment)["spec"]["template"]["spec"]["containers"][0]


def test_images_replicas_resources_and_flags():
    resources = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "4", "memory": "4Gi"}}
    objects = render_chart({
        "image": {"repository": "registry.example.com/ml/gangkeeper", "tag": "0.1.0-rc1", "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "registry"}],
        "webhook": {"replicas": 3, "flags": {"workers": 4, "max-body-bytes": 6291456,
                                             "accelerators": "nvidia.com/gpu,amd.com/gpu"},
                    "image": {"tag": "0.1.0-webhook"}, "priorityClassName": "system-cluster-critical",
                    "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}]},
        "controller": {"replicas": 1, "resources": resources, "nodeSelector": {"pool": "system"},
                       "flags": {"policy": "StrictFIFO", "bind-timeout-seconds": 300,
                                 "fail-on-schedule-timeout": True, "dry-run": False}},
    })
    webhook, controller = _container(objects, "gangkeeper-webhook"), _container(objects, "gangkeeper-controller")
    assert webhook["image"] == "registry.example.com/ml/gangkeeper:0.1.0-webhook"
    assert controller["image"] == "registry.example.com/ml/gangkeeper:0.1.0-rc1"
    assert webhook["imagePullPolicy"] == controller["imagePullPolicy"] == "Always"
    assert webhook["args"] == ["webhook", "--port", "9443", "--cert-dir", "/etc/gangkeeper/tls",
                               "--accelerators=nvidia.com/gpu,amd.com/gpu", "--max-body-bytes=6291456", "--workers=4"]
    assert controller["args"] == ["controller", "--bind-timeout-seconds=300", "--fail-on-schedule-timeout",
                                  "--policy=StrictFIFO"]
    assert controller["resources"] == resources
    assert find(objects, "Deployment", "gangkeeper-webhook")["spec"]["replicas"] == 3
    assert find(objects, "Deployment", "gangkeeper-controller")["spec"]["replicas"] == 1
    webhook_pod = find(objects, "Deployment", "gangkeeper-webhook")["spec"]["template"]["spec"]
    controller_pod = find(objects, "Deployment", "gangkeeper-controller")["spec"]["template"]["spec"]
    assert webhook_pod["priorityClassName"] == "system-cluster-critical"
    assert webhook_pod["tolerations"] == [{"key": "CriticalAddonsOnly", "operator": "Exists"}]
    assert controller_pod["nodeSelector"] == {"pool": "system"}
    assert webhook_pod["imagePullSecrets"] == controller_pod["imagePullSecrets"] == [{"name": "registry"}]
    for obj in objects:
        if obj["kind"] != "CustomResourceDefinition":
            kubernetes_validate.validate(obj, "1.33", strict=True)


def test_one_webhook_replica_gets_no_budget_that_would_block_every_drain():
    assert of_kind(render_chart({"webhook": {"replicas": 1}}), "PodDisruptionBudget") == []


@pytest.mark.parametrize("values", [
    {"webhook": {"flags": {"port": 8443}}},
    {"webhook": {"flags": {"cert-dir": "/tls"}}},
    {"controller": {"flags": {"metrics-port": 9090}}},
    {"controller": {"flags": {"lease-name": "other"}}},
    {"certificates": {"source": "vault"}},
    {"webhook": {"replicas": "two"}},
    {"namespace": {"name": "Not_A_Name"}},
], ids=["webhook-port", "cert-dir", "metrics-port", "lease-name", "unknown-certificate-source", "replicas-not-a-number",
        "invalid-namespace"])
def test_what_the_chart_fixes_cannot_be_set(values):
    with pytest.raises(helm.HelmError):
        render_chart(values)


@pytest.mark.parametrize("values, says", [
    ({"controller": {"capacityProvisioning": "Karpenter"}},
     "at '/controller/capacityProvisioning': value must be one of 'None', 'ProvisioningRequest', 'Placeholders'"),
    ({"controller": {"flags": {"capacity-provisioning": "Placeholders"}}},
     "--capacity-provisioning is set by the value controller.capacityProvisioning: set that instead of the flag"),
], ids=["unknown-mode", "as-a-flag"])
def test_capacity_provisioning_is_one_of_its_modes_set_by_its_value(values, says):
    with pytest.raises(helm.HelmError) as refused:
        render_chart(values)
    assert says in str(refused.value)


def test_failure_policy_and_timeout_reach_both_configurations():
    objects = render_chart({"webhook": {"failurePolicy": "Ignore", "timeoutSeconds": 3}})
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for webhook in find(objects, kind, names.WEBHOOK_CONFIGURATION)["webhooks"]:
            assert (webhook["failurePolicy"], webhook["timeoutSeconds"]) == ("Ignore", 3)


# --- refreshing the CRD copy --------------------------------------------------------------------

def write_crd_copy() -> None:
    """Write kustomize's rendering of the Gang CRD to charts/gangkeeper/crds/gangs.yaml."""
    out = subprocess.run([str(KUBECTL), "kustomize", str(REPO / "deploy" / "default")],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    docs = [doc for doc in out.split("\n---\n")
            if (yaml.safe_load(doc) or {}).get("kind") == "CustomResourceDefinition"]
    assert len(docs) == 1, f"expected one CustomResourceDefinition, found {len(docs)}"
    CRD_COPY.write_text(CRD_HEADER + docs[0].rstrip("\n") + "\n")
    print(f"wrote {CRD_COPY.relative_to(REPO)}", file=sys.stderr)


if __name__ == "__main__":
    write_crd_copy()
