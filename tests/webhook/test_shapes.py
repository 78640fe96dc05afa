"""/mutate reads an AdmissionReview through its shape: every key it reads is in the shape, a
review read through it gets the answer the whole review gets, and JSON off the shape is read whole."""

import json

import orjson
import pytest

from gangkeeper import names
from gangkeeper.webhook.app import create_app
from gangkeeper.webhook.mutate import mutate
from gangkeeper.webhook.policy import Policy
from gangkeeper.webhook.review import parse_review
from gangkeeper.webhook.shapes import MutateReview, mutate_review
from tests.recording import Recorded
from tests.webhook.builders import FIXTURES, container, owner, placeholder, pod, pytorchjob_pod, review

POLICY = Policy()


def recorded_reviews():
    """Every review the recordings of a real API server sent, /mutate's and /validate's."""
    return [json.loads(path.read_text())["review"] for path in sorted(FIXTURES.glob("*.json"))]


def labelled(name, labels, owned_by=None, **kw):
    return pod(name, labels=labels, gpus=8, owner=owned_by, **kw)


BUILT = [
    pytorchjob_pod(),
    pytorchjob_pod(role="master", gpus=1),
    placeholder(),
    labelled("trainer-workers-0-0-x7k2p", {names.JOBSET_NAME_LABEL: "trainer", names.JOBSET_UID_LABEL: "5c1d",
                                           names.JOBSET_RESTART_ATTEMPT_LABEL: "0",
                                           names.JOBSET_REPLICATED_JOB_LABEL: "workers",
                                           names.JOB_NAME_LABEL: "trainer-workers-0"},
             owner("Job", "trainer-workers-0", "aa11", "batch/v1")),
    labelled("sweep-3-abcde", {names.JOB_NAME_LABEL: "sweep", names.JOB_COMPLETION_INDEX: "3"},
             owner("Job", "sweep", "0b4e", "batch/v1")),
    labelled("lws-0-1", {names.LWS_NAME_LABEL: "lws", names.LWS_GROUP_INDEX_LABEL: "0",
                         names.LWS_WORKER_INDEX_LABEL: "1"}, owner("StatefulSet", "lws-0", "c3d4", "apps/v1")),
    labelled("ray-worker-x", {names.RAY_CLUSTER_LABEL: "ray", names.RAY_NODE_TYPE_LABEL: names.RAY_WORKER,
                              names.RAY_GROUP_LABEL: "gpu"}, owner("RayCluster", "ray", "e5f6", "ray.io/v1")),
    labelled("pi-worker-0", {names.KUBEFLOW_JOB_NAME_LABEL: "pi", names.KUBEFLOW_JOB_ROLE_LABEL: names.MPI_WORKER,
                             names.KUBEFLOW_OPERATOR_NAME_LABEL: "mpi-operator"},
             owner("MPIJob", "pi", "0c1d", "kubeflow.org/v2beta1")),
    pod("pg-0", labels={names.PLUGINS_POD_GROUP_LABEL: "pg"}),
    pod("npg-0", labels={names.NATIVE_POD_GROUP_LABEL: "pg"}),
    pod("v-0", annotations={names.VOLCANO_GROUP_ANNOTATION: "vg"}),
    pod("etl-0", labels={names.GROUP_LABEL: "etl"}),
    pod("notebook", gpus=1, generate_name="notebook-"),
    pod("rocm", containers=[container(gpus=2, gpu_resource="amd.com/gpu")]),
    pod("sidecar", initContainers=[{**container("init", gpus=1), "restartPolicy": "Always"}]),
    pod("k", gpus=1, gates=["kueue.x-k8s.io/admission"]),
    pod("n", gpus=1, schedulingGroup={"podGroupName": "pg"}),
    pod("b", gpus=1, node_name="gpu-node-1"),
    pod("web"),
]
REVIEWS = recorded_reviews() + [review(obj) for obj in BUILT] + [
    review(pytorchjob_pod(), operation="UPDATE", old=pytorchjob_pod()),
    review(old=pytorchjob_pod(), operation="DELETE"),
    review(pytorchjob_pod(), dry_run=True),
]


def test_the_cases_reach_every_way_a_pod_is_grouped():
    sources = {mutate(parse_review(case), POLICY).source for case in REVIEWS}
    assert sources >= {names.SOURCE_PYTORCHJOB, names.SOURCE_JOBSET, names.SOURCE_JOB, names.SOURCE_EXPLICIT,
                       names.SOURCE_ACCELERATOR_POD, names.SOURCE_PLUGINS_POD_GROUP, names.SOURCE_VOLCANO_POD_GROUP,
                       names.SOURCE_LEADERWORKERSET, names.SOURCE_RAYCLUSTER, names.SOURCE_MPIJOB,
                       names.SOURCE_NATIVE_POD_GROUP}


@pytest.mark.parametrize("case", REVIEWS, ids=range(len(REVIEWS)))
def test_every_key_mutate_reads_of_a_review_is_in_its_shape(case):
    reads = set()
    request = parse_review(Recorded(case, MutateReview, "", reads))
    mutate(request, POLICY)
    assert request.pod_name is not None
    assert reads == set()


@pytest.mark.parametrize("case", REVIEWS, ids=range(len(REVIEWS)))
def test_a_review_read_through_the_shape_gets_the_answer_the_whole_review_gets(case):
    body = orjson.dumps(case)
    shaped, whole = parse_review(mutate_review(body)), parse_review(orjson.loads(body))
    assert (mutate(shaped, POLICY), shaped.pod_name, shaped.uid, shaped.username) == (
        mutate(whole, POLICY), whole.pod_name, whole.uid, whole.username)


def test_what_mutate_does_not_read_is_left_out():
    obj = pytorchjob_pod()
    obj["spec"]["containers"][0]["env"] = [{"name": "WORLD_SIZE", "value": "32"}]
    obj["spec"]["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    obj["metadata"]["managedFields"] = [{"manager": "training-operator"}]
    shaped = mutate_review(orjson.dumps(review(obj)))["request"]["object"]
    assert ("env" not in shaped["spec"]["containers"][0], "volumes" in shaped["spec"],
            "managedFields" in shaped["metadata"]) == (True, False, False)
    assert shaped["spec"]["containers"][0]["resources"] == obj["spec"]["containers"][0]["resources"]


@pytest.mark.parametrize("change", [
    lambda obj: obj.update(spec="not an object"),
    lambda obj: obj["spec"].update(containers=["not an object"]),
    lambda obj: obj.update(metadata=None),
], ids=["spec a string", "a container a string", "metadata null"])
def test_a_review_off_the_shape_is_read_whole(change):
    obj = pytorchjob_pod()
    change(obj)
    body = orjson.dumps(review(obj))
    assert mutate_review(body) == orjson.loads(body)


def test_the_webhook_names_what_is_wrong_in_a_review_off_the_shape():
    obj = pytorchjob_pod()
    obj["spec"] = "not an object"
    answer = create_app().test_client().post("/mutate", data=orjson.dumps(review(obj)),
                                             content_type="application/json")
    assert answer.status_code == 400
    assert "spec: must be a JSON object, not a JSON string" in answer.get_json()["error"]


def test_a_body_that_is_not_json_is_refused_as_before():
    answer = create_app().test_client().post("/mutate", data=b'{"apiVersion": ', content_type="application/json")
    assert answer.status_code == 400
    assert answer.get_json()["error"].startswith("body is not valid JSON")
