"""CRD schemas as the API server applies them (tests/crds.py): what they accept and refuse, and their defaults."""

import jsonschema
import pytest

from tests.crds import defaulted, ecosystem_crd, openapi_schema, structural

NAMED = {"type": "object", "properties": {"name": {"type": "string"}}}


def errors(schema: dict, value) -> list[str]:
    return [error.message for error in jsonschema.Draft202012Validator(structural(schema)).iter_errors(value)]


def test_a_field_the_schema_does_not_declare_is_refused_as_the_server_would_prune_it():
    assert errors(NAMED, {"name": "a"}) == []
    assert errors(NAMED, {"name": "a", "nmae": "b"}) == ["Additional properties are not allowed ('nmae' was unexpected)"]


def test_preserve_unknown_fields_keeps_them():
    assert errors({**NAMED, "x-kubernetes-preserve-unknown-fields": True}, {"name": "a", "extra": {"x": 1}}) == []


def test_a_map_keeps_its_keys_and_checks_its_values():
    labels = {"type": "object", "additionalProperties": {"type": "string"}}
    assert errors(labels, {"team": "vision"}) == []
    assert errors(labels, {"gpus": 8}) == ["8 is not of type 'string'"]


def test_nullable_admits_null_and_nothing_else_does():
    assert errors({"type": "string", "nullable": True}, None) == []
    assert errors({"type": "string", "enum": ["a"], "nullable": True}, None) == []
    assert errors({"type": "string"}, None) == ["None is not of type 'string'"]


def test_int_or_string_admits_either_and_nothing_else():
    quantity = {"x-kubernetes-int-or-string": True}
    assert errors(quantity, 2) == [] and errors(quantity, "500m") == []
    assert errors(quantity, {"value": 2}) != []


def test_an_embedded_resource_has_its_apiversion_kind_and_metadata():
    embedded = {**NAMED, "x-kubernetes-embedded-resource": True}
    assert errors(embedded, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "name": "a"}) == []


def test_branches_of_anyof_constrain_without_closing_the_object():
    one_of_two = {**NAMED, "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                  "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}
    assert errors(one_of_two, {"a": "x", "b": "y"}) == []
    assert errors(one_of_two, {}) != []


def test_cel_rules_and_list_types_are_left_out():
    schema = structural({"type": "array", "items": NAMED, "x-kubernetes-list-type": "map",
                         "x-kubernetes-list-map-keys": ["name"],
                         "x-kubernetes-validations": [{"rule": "size(self) < 2", "message": "one at most"}]})
    assert not [key for key in schema if key.startswith("x-kubernetes-")]


def test_defaults_apply_where_their_object_is_there():
    schema = {"type": "object", "properties": {
        "suspend": {"type": "boolean", "default": False},
        "ref": {"type": "object", "properties": {"kind": {"type": "string", "default": "Runtime"}}},
        "jobs": {"type": "array", "items": {"type": "object", "properties": {"replicas": {"type": "integer",
                                                                                          "default": 1}}}}}}
    assert defaulted(schema, {}) == {"suspend": False}
    assert defaulted(schema, {"suspend": True, "ref": {}, "jobs": [{}, {"replicas": 3}]}) == {
        "suspend": True, "ref": {"kind": "Runtime"}, "jobs": [{"replicas": 1}, {"replicas": 3}]}


@pytest.mark.parametrize(("name", "version"), [
    ("trainer.kubeflow.org_trainjobs", "v1alpha1"), ("trainer.kubeflow.org_trainingruntimes", "v1alpha1"),
    ("trainer.kubeflow.org_clustertrainingruntimes", "v1alpha1"), ("jobset.x-k8s.io_jobsets", "v1alpha2")])
def test_the_ecosystems_schemas_are_valid_json_schemas_once_converted(name, version):
    jsonschema.Draft202012Validator.check_schema(structural(openapi_schema(ecosystem_crd(name), version)))
