"""The OpenAPI v3 documents kubectl reads before it applies, and the field validation they promise."""

import json
import urllib.request

import pytest

from sim.apiserver import APIServer
from sim.kinds import Registry
from sim.openapi import Documents, custom_resource_definitions
from sim.server import RunningServer
from tests.sim.helpers import http, namespace, pod

DOCUMENTS = Documents(Registry(), custom_resource_definitions())


def patch_operation(document: dict, kind: str) -> dict:
    return next(p["patch"] for p in document["paths"].values()
                if "patch" in p and p["patch"]["x-kubernetes-group-version-kind"]["kind"] == kind)


def test_the_index_names_a_document_per_group_version_served():
    paths = DOCUMENTS.index()["paths"]
    assert {"api/v1", "apis/batch/v1", "apis/gangkeeper.io/v1alpha1", "apis/kubeflow.org/v1"} <= set(paths)
    assert paths["api/v1"]["serverRelativeURL"].startswith("/openapi/v3/api/v1?hash=")


def test_every_kind_takes_field_validation_on_patch_so_kubectl_leaves_validation_to_the_server():
    """kubectl's QueryParamVerifierV3 looks for `fieldValidation` among the PATCH parameters."""
    for path in DOCUMENTS.index()["paths"]:
        document = DOCUMENTS.group_version(path)
        for operations in document["paths"].values():
            if "patch" in operations:
                assert "fieldValidation" in [p["name"] for p in operations["patch"]["parameters"]]
    core = DOCUMENTS.group_version("api/v1")
    assert patch_operation(core, "Pod")["x-kubernetes-group-version-kind"] == {"group": "", "version": "v1",
                                                                               "kind": "Pod"}
    assert "io.k8s.api.core.v1.PodSpec" in core["components"]["schemas"]
    assert "io.k8s.api.batch.v1.Job" not in core["components"]["schemas"], "each document holds what it reaches"


def test_the_gang_schema_is_the_crds_with_metadata_as_object_meta():
    schemas = DOCUMENTS.group_version("apis/gangkeeper.io/v1alpha1")["components"]["schemas"]
    gang = schemas["io.gangkeeper.v1alpha1.Gang"]
    assert gang["properties"]["spec"]["properties"]["minCount"]["type"] == "integer"
    assert gang["properties"]["metadata"]["allOf"] == [
        {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]
    assert gang["x-kubernetes-group-version-kind"] == [{"group": "gangkeeper.io", "version": "v1alpha1",
                                                        "kind": "Gang"}]
    assert all(not isinstance(s.get("type"), list) for s in schemas.values()), "OpenAPI types, not JSON Schema lists"


@pytest.mark.parametrize("resource, obj, unknown", [
    ("pods", {"metadata": {"name": "p", "colour": "red"}, "spec": {"containers": [{"name": "c", "imag": "x"}]}},
     ["metadata.colour", "spec.containers[0].imag"]),
    ("pods", {"metadata": {"labels": {"any": "thing"}}, "spec": {"nodeSelector": {"a": "b"}}}, []),
    ("gangs", {"spec": {"minCount": 2, "size": 3}, "status": {"phase": "Waiting"}}, ["spec.size"]),
    ("pytorchjobs", {"spec": {"anything": {"goes": 1}}, "metadata": {"nam": "x"}}, ["metadata.nam"]),
])
def test_unknown_fields_are_named_by_their_path(resource, obj, unknown):
    assert DOCUMENTS.unknown_fields(Registry().by_name(resource), obj) == unknown


def test_the_server_serves_v3_refuses_unknown_fields_when_strict_and_warns_when_asked():
    api = APIServer()
    api.create("namespaces", namespace("ml"))
    bad = pod("p")
    bad["spec"]["colour"] = "red"
    with RunningServer(api) as served:
        assert http(served.url, "GET", "/openapi/v3")[0] == 200
        assert http(served.url, "GET", "/openapi/v3/apis/gangkeeper.io/v1alpha1?hash=x")[1]["openapi"] == "3.0.0"
        assert http(served.url, "GET", "/openapi/v3/apis/nowhere.example.com/v1")[0] == 404
        assert http(served.url, "GET", "/openapi/v2")[0] == 404, "v2 is protobuf only for kubectl: not served"
        code, refused = http(served.url, "POST", "/api/v1/namespaces/ml/pods?fieldValidation=Strict", bad)
        assert code == 400 and refused["message"] == ('Pod in version "v1" cannot be handled as a Pod: strict decoding '
                                                      'error: unknown field "spec.colour"')
        request = urllib.request.Request(f"{served.url}/api/v1/namespaces/ml/pods?fieldValidation=Warn",
                                         data=json.dumps(bad).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 201 and answer.headers["Warning"] == '299 - "unknown field "spec.colour""'
        code, refused = http(served.url, "PATCH", "/api/v1/namespaces/ml/pods/p?fieldValidation=Strict",
                             {"metadata": {"labels": {"a": "b"}}, "spec": {"$setElementOrder/containers": [],
                                                                          "shape": 1}},
                             content_type="application/strategic-merge-patch+json")
        assert code == 400 and 'unknown field "spec.shape"' in refused["message"], "directives are not fields"
        assert http(served.url, "POST", "/api/v1/namespaces/ml/pods", dict(bad, metadata={"name": "q"}))[0] == 201, \
            "without fieldValidation (the controller, the operators) nothing is checked"
