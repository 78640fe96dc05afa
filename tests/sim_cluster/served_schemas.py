"""The schemas the emulation's served objects are held to, as a real API server would hold them.

Built-in kinds by the Kubernetes OpenAPI schemas `kubernetes-validate` ships; custom resources by
the openAPIV3Schema of their CRD where the repository carries it (deploy/base for Gangs,
tests/fixtures/ecosystem/crds for the ecosystem's), and otherwise (PyTorchJob, JobSet,
scheduler-plugins PodGroup) by schemas written here from the upstream Go types. Timestamps are
checked as RFC 3339.
"""

import re
from datetime import datetime

import jsonschema
import yaml
from kubernetes_validate import utils as schema_files
from referencing import Registry, Resource

from gangkeeper import names
from sim.deployed import DEPLOY_BASE
from tests.crds import ecosystem_crd, structural

KUBERNETES = "1.37"  # the newest schemas kubernetes-validate ships; the API of the official client 37

DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
FORMATS = jsonschema.FormatChecker()


@FORMATS.checks("date-time", raises=ValueError)
def rfc3339(value) -> bool:
    """RFC 3339 date-times (jsonschema checks them only with an optional package installed)."""
    if isinstance(value, str):
        if not DATE_TIME.match(value):
            return False
        datetime.fromisoformat(value)  # ValueError for a day or an hour that does not exist
    return True


DEFINITIONS = schema_files.schema_contents(f"kubernetes-json-schema/v{KUBERNETES}.0-local-strict/_definitions.json",
                                           KUBERNETES)
META = f"{DEFINITIONS['$id']}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1."
OBJECT_META = {"$ref": META + "ObjectMeta"}
COUNT = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
TEXT = {"type": "string"}
TIME = {"type": "string", "format": "date-time"}


def closed(properties: dict, required: tuple[str, ...] = ()) -> dict:
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False}


def custom_resource(api_version: str, kind: str, status: dict | None = None) -> dict:
    properties = {"apiVersion": {"const": api_version}, "kind": {"const": kind}, "metadata": OBJECT_META,
                  "spec": {"type": "object"}}
    if status is not None:
        properties["status"] = status
    return closed(properties, ("apiVersion", "kind", "metadata", "spec"))


# kubeflow.org/v1 JobStatus, JobCondition and ReplicaStatus (training operator, common_types.go).
PYTORCHJOB = custom_resource("kubeflow.org/v1", "PyTorchJob", closed({
    "conditions": {"type": "array", "items": closed({
        "type": {"enum": ["Created", "Running", "Restarting", "Succeeded", "Failed", "Suspended"]},
        "status": {"enum": ["True", "False", "Unknown"]}, "reason": TEXT, "message": TEXT,
        "lastUpdateTime": TIME, "lastTransitionTime": TIME}, ("type", "status"))},
    "replicaStatuses": {"type": "object", "additionalProperties": closed({
        "active": COUNT, "succeeded": COUNT, "failed": COUNT, "labelSelector": {"type": "object"},
        "selector": TEXT})},
    "startTime": TIME, "completionTime": TIME, "lastReconcileTime": TIME}, ("conditions", "replicaStatuses")))
# jobset.x-k8s.io/v1alpha2 JobSetStatus and ReplicatedJobStatus (jobset_types.go).
JOBSET = custom_resource("jobset.x-k8s.io/v1alpha2", "JobSet", closed({
    "conditions": {"type": "array", "items": {"$ref": META + "Condition"}},
    "restarts": COUNT, "restartsCountTowardsMax": COUNT, "terminalState": {"enum": ["Completed", "Failed"]},
    "replicatedJobsStatus": {"type": "array", "items": closed({
        "name": TEXT, "ready": COUNT, "succeeded": COUNT, "failed": COUNT, "active": COUNT, "suspended": COUNT,
        "jobRestarts": {"type": "array", "items": COUNT}, "jobRestartsCountTowardsMax": {"type": "array", "items": COUNT},
    }, ("name", "ready", "succeeded", "failed", "active", "suspended"))},
    "previousInPlaceRestartAttempt": COUNT, "currentInPlaceRestartAttempt": COUNT}))
# scheduling.x-k8s.io/v1alpha1: the emulation writes no PodGroup status (no scheduler-plugins controller).
PLUGINS_POD_GROUP = custom_resource("scheduling.x-k8s.io/v1alpha1", "PodGroup")


def crd_schema(crd: dict, version_name: str) -> dict:
    """The openAPIV3Schema of a CRD's version, as served objects are held to it (tests/crds.py), metadata ObjectMeta."""
    [version] = [v for v in crd["spec"]["versions"] if v["name"] == version_name]
    schema = structural(version["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = OBJECT_META
    return schema


def gang_schema() -> dict:
    return crd_schema(yaml.safe_load((DEPLOY_BASE / "crd-gangs.yaml").read_text()), names.GANG_VERSION)


def lws_schema() -> dict:
    return crd_schema(ecosystem_crd("leaderworkerset.x-k8s.io_leaderworkersets"), "v1")


def validator(schema: dict) -> jsonschema.Draft202012Validator:
    registry = Resource.from_contents(DEFINITIONS) @ Registry()
    return jsonschema.Draft202012Validator(schema, registry=registry, format_checker=FORMATS)


CUSTOM_SCHEMAS = {"pytorchjobs": PYTORCHJOB, "jobsets": JOBSET, "podgroups": PLUGINS_POD_GROUP}
# Custom resources whose real CRD the repository carries (tests/fixtures/ecosystem/crds), by file and version.
ECOSYSTEM_SCHEMAS = {"trainjobs": ("trainer.kubeflow.org_trainjobs", "v1alpha1"),
                     "trainingruntimes": ("trainer.kubeflow.org_trainingruntimes", "v1alpha1"),
                     "clustertrainingruntimes": ("trainer.kubeflow.org_clustertrainingruntimes", "v1alpha1"),
                     "rayclusters": ("ray.io_rayclusters", "v1"), "rayjobs": ("ray.io_rayjobs", "v1"),
                     "mpijobs": ("kubeflow.org_mpijobs", "v2beta1"),
                     "provisioningrequests": ("autoscaling.x-k8s.io_provisioningrequests", "v1")}
