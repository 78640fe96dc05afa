"""Every rendered object of a built-in kind is valid against the Kubernetes 1.33 OpenAPI schemas.

kubernetes-validate ships JSON schemas for built-in kinds only. Strict mode refuses unknown
fields, so a misspelt or misplaced key fails here instead of being dropped by the apiserver. A
CustomResourceDefinition is a built-in kind and is validated, but only as an object: the
apiserver's extra rules for structural schemas are not checked, which is why the Gang schema is
also exercised on sample Gangs below. Instances of custom resources (cert-manager's Issuer and
Certificate) have no schema there and are the only objects skipped.
"""

import copy

import jsonschema
import kubernetes_validate
import pytest

from gangkeeper import names
from tests.deploy.rendered_manifests import find

KUBERNETES_VERSION = "1.33"
CUSTOM_RESOURCE_GROUPS = {"cert-manager.io"}


def _group(obj):
    return obj["apiVersion"].rpartition("/")[0]


def test_every_built_in_object_is_valid(rendered):
    errors = []
    for obj in rendered:
        if _group(obj) in CUSTOM_RESOURCE_GROUPS:
            continue
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as err:
            errors.append(f"{obj['kind']} {obj['metadata']['name']}: {'.'.join(map(str, err.path))}: {err.message}")
    assert not errors, "\n".join(errors)


def test_only_custom_resource_instances_lack_a_schema(rendered):
    for obj in rendered:
        if _group(obj) in CUSTOM_RESOURCE_GROUPS:
            with pytest.raises(kubernetes_validate.SchemaNotFoundError):
                kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_strict_validation_catches_a_misplaced_field(default):
    deployment = copy.deepcopy(find(default, "Deployment", "gangkeeper-webhook"))
    deployment["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFilesystem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


@pytest.fixture(scope="module")
def gang_schema(default):
    crd = find(default, "CustomResourceDefinition", f"{names.GANG_PLURAL}.{names.GANG_GROUP}")
    (version,) = crd["spec"]["versions"]
    assert version["name"] == names.GANG_VERSION and version["storage"] and version["served"]
    assert crd["spec"]["names"]["kind"] == names.GANG_KIND
    return jsonschema.Draft202012Validator(version["schema"]["openAPIV3Schema"])


def _gang(spec, status=None):
    gang = {"apiVersion": f"{names.GANG_GROUP}/{names.GANG_VERSION}", "kind": names.GANG_KIND,
            "metadata": {"name": "train"}, "spec": spec}
    return gang | ({"status": status} if status else {})


@pytest.mark.parametrize("spec", [
    {"minCount": names.MIN_COUNT_RANGE[0]},
    {"minCount": names.MIN_COUNT_RANGE[1], "scheduleTimeoutSeconds": 0, "priority": -5, "groupName": "llama-7b.run_1"},
    {"minCount": 2, "parent": "inference.pair-1"},
    {"minGroupCount": names.MIN_GROUP_COUNT_RANGE[1], "topology": {"required": "topology.kubernetes.io/zone"}},
])
def test_gang_schema_accepts(gang_schema, spec):
    status = {"phase": "Waiting", "present": 3, "minCount": 4, "accelerators": 32, "conditions": [
        {"type": "TimedOut", "status": "True", "reason": "ScheduleTimeout", "message": "waited 600s",
         "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}]}
    assert not list(gang_schema.iter_errors(_gang(spec, status)))


@pytest.mark.parametrize("spec", [
    {},
    {"minCount": names.MIN_COUNT_RANGE[0] - 1},
    {"minCount": names.MIN_COUNT_RANGE[1] + 1},
    {"minCount": 2, "scheduleTimeoutSeconds": -1},
    {"minCount": 2, "groupName": "-starts-with-dash"},
    {"minCount": 2, "groupName": "x" * 64},
    {"minCount": 2, "minGroupCount": 2},
    {"minGroupCount": names.MIN_GROUP_COUNT_RANGE[0] - 1},
    {"minGroupCount": names.MIN_GROUP_COUNT_RANGE[1] + 1},
    {"minCount": 2, "parent": "Not_A_Name"},
])
def test_gang_schema_refuses(gang_schema, spec):
    assert list(gang_schema.iter_errors(_gang(spec)))


def test_gang_status_phase_is_an_enum_and_conditions_have_the_metav1_shape(gang_schema):
    assert list(gang_schema.iter_errors(_gang({"minCount": 1}, {"phase": "Pending"})))
    assert list(gang_schema.iter_errors(_gang({"minCount": 1}, {"conditions": [{"type": "Ready", "status": "True"}]})))


def test_a_parents_status_lists_its_children(gang_schema):
    children = [{"name": "prefill", "present": 2, "minCount": 2, "placed": 0}, {"name": "decode"}]
    assert not list(gang_schema.iter_errors(_gang({"minGroupCount": 2}, {"phase": "Waiting", "children": children})))
    assert list(gang_schema.iter_errors(_gang({"minGroupCount": 2}, {"children": [{"present": 2}]})))


def test_gang_printer_columns(default):
    crd = find(default, "CustomResourceDefinition", f"{names.GANG_PLURAL}.{names.GANG_GROUP}")
    (version,) = crd["spec"]["versions"]
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["Phase", "Reason", "Present", "Min", "Placed", "GPUs", "Parent", "Topology", "Waiting", "Age"]
    assert version["subresources"] == {"status": {}}
    assert crd["spec"]["scope"] == "Namespaced" and crd["spec"]["names"]["shortNames"] == ["gang"]
