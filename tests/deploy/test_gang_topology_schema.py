"""The Gang CRD's `spec.topology` (issue 13): its structural schema on sample Gangs, and its CEL
rules (`x-kubernetes-validations`, which jsonschema does not know) evaluated with cel-python on
each object they are attached to, as the API server does."""

import celpy
import jsonschema
import pytest

from gangkeeper import names
from tests.deploy.rendered_manifests import find

CLIQUE = "nvidia.com/gpu.clique"


@pytest.fixture(scope="module")
def openapi(default):
    crd = find(default, "CustomResourceDefinition", f"{names.GANG_PLURAL}.{names.GANG_GROUP}")
    (version,) = crd["spec"]["versions"]
    return version["schema"]["openAPIV3Schema"]


def gang(topology, min_count=16):
    return {"apiVersion": f"{names.GANG_GROUP}/{names.GANG_VERSION}", "kind": names.GANG_KIND,
            "metadata": {"name": "llm"}, "spec": {"minCount": min_count, "topology": topology}}


def schema_errors(openapi, obj):
    return list(jsonschema.Draft202012Validator(openapi).iter_errors(obj))


def cel_messages(openapi, obj):
    """The message of every CEL rule that fails, from the schema node it is attached to down."""
    failed, pending = [], [(openapi, obj)]
    environment = celpy.Environment()
    while pending:
        schema, value = pending.pop()
        if not isinstance(value, dict):
            continue
        for rule in schema.get("x-kubernetes-validations", ()):
            program = environment.program(environment.compile(rule["rule"]))
            if not program.evaluate({"self": celpy.json_to_cel(value)}):
                failed.append(rule["message"])
        pending += [(child, value[name]) for name, child in schema.get("properties", {}).items() if name in value]
    return failed


def test_the_gang_schema_declares_every_topology_field(openapi):
    topology = openapi["properties"]["spec"]["properties"]["topology"]
    assert set(topology["properties"]) == set(names.GANG_TOPOLOGY_FIELDS)


@pytest.mark.parametrize("topology", [
    {"required": "topology.kubernetes.io/zone"},
    {"required": "topology.kubernetes.io/zone", "preferred": "cloud.google.com/gce-topology-block"},
    {"preferred": "rack", "sliceRequired": CLIQUE, "sliceSize": 4},
    {"required": f"{'a' * 253}/{'n' * 63}"},
    {},
])
def test_the_gang_schema_accepts_label_keys_and_a_slice_with_its_size(openapi, topology):
    assert not schema_errors(openapi, gang(topology)) and not cel_messages(openapi, gang(topology))


@pytest.mark.parametrize("topology", [
    {"required": "Bad Key"},
    {"required": "/zone"},
    {"preferred": "a/b/c"},
    {"sliceRequired": "x" * 64, "sliceSize": 4},
    {"required": f"{'a' * 254}/{'n' * 63}"},
    {"sliceRequired": CLIQUE, "sliceSize": 0},
    {"sliceRequired": CLIQUE, "sliceSize": "4"},
    {"required": 7},
])
def test_the_gang_schema_refuses_what_is_no_label_key_or_slice_size(openapi, topology):
    assert schema_errors(openapi, gang(topology))


@pytest.mark.parametrize("topology", [{"sliceSize": 4}, {"sliceRequired": CLIQUE}])
def test_a_slice_label_and_size_come_together(openapi, topology):
    assert cel_messages(openapi, gang(topology)) == [
        "sliceRequired and sliceSize come together: give both, or neither"]


def test_min_count_must_be_a_multiple_of_the_slice_size(openapi):
    assert cel_messages(openapi, gang({"sliceRequired": CLIQUE, "sliceSize": 4}, min_count=6)) == [
        "minCount must be a multiple of topology.sliceSize: write a slice size that divides minCount"]
    assert not cel_messages(openapi, gang({"sliceRequired": CLIQUE, "sliceSize": 4}, min_count=8))


def test_the_printer_column_shows_the_required_topology(openapi, default):
    crd = find(default, "CustomResourceDefinition", f"{names.GANG_PLURAL}.{names.GANG_GROUP}")
    (version,) = crd["spec"]["versions"]
    (column,) = [c for c in version["additionalPrinterColumns"] if c["name"] == "Topology"]
    assert column["jsonPath"] == ".spec.topology.required" and column["type"] == "string"
