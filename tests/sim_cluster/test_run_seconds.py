"""The shipped examples whose pods run real programs (`tune run`, torchrun, `ray job submit`), applied
as they are, on the emulated cluster's virtual clock in a namespace gangkeeper does not enforce.

Nothing in those pods says how long they run, so on a cluster without run seconds they run until
stopped and their workloads never finish. Given run seconds (`sim serve --run-seconds`), each pod
that runs to completion (a Job's: restartPolicy Never or OnFailure, the JobSet webhook's default)
runs that long with the rest of its run, so the TrainJobs and the RayJob complete, while servers
(restartPolicy Always: a RayJob's cluster, an LWS) keep running.
"""

import pytest
import yaml

from sim.apiserver import APIServer
from sim.cluster import emulated_cluster
from sim.operators.ray import RAYJOBS
from sim.spec import load
from tests.recorded import FIXTURES

EXAMPLES = FIXTURES / "ecosystem" / "examples"
NS = "research"
RUN_SECONDS = 30.0
WITHIN = 600.0  # cluster seconds: far more than any example takes with run seconds


def shipped(name: str) -> list[dict]:
    return [document for document in yaml.safe_load_all((EXAMPLES / name).read_text()) if document]


class Emulation:
    """Two 8-GPU nodes, the emulated operators, and a namespace; `run_seconds` as `sim serve` gives it."""

    def __init__(self, clock, run_seconds: float | None):
        self.clock, self.api = clock, APIServer(clock=clock.now)
        self.api.create("namespaces", {"metadata": {"name": NS}})
        self.cluster = emulated_cluster(self.api, clock, spec=load("nodes: [{count: 2, gpusPerNode: 8}]"),
                                        run_seconds=run_seconds)

    def apply(self, *names: str) -> None:
        for name in names:
            for document in shipped(name):
                kind = self.api.kinds.by_kind(document["apiVersion"], document["kind"])
                self.api.create(self.api.resource_name(kind), document, namespace=NS if kind.namespaced else None)

    def run(self) -> None:
        self.cluster.run_until(self.clock.now() + WITHIN)

    def phases(self, prefix: str) -> list[str]:
        return sorted(p["status"]["phase"] for p in self.api.list("pods", namespace=NS)
                      if p["metadata"]["name"].startswith(prefix))

    def conditions(self, resource: str, name: str) -> dict[str, str]:
        status = self.api.get(resource, name, namespace=NS).get("status") or {}
        return {c["type"]: c["status"] for c in status.get("conditions") or ()}


def trainjob(name: str, runtime: str) -> dict:
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
            "spec": {"runtimeRef": {"name": runtime}, "trainer": {"numNodes": 2}}}


@pytest.mark.parametrize("runtime", ["torch-distributed", "torchtune-llama3.2-1b"])
def test_a_trainjob_on_a_shipped_runtime_completes_given_run_seconds(clock, runtime):
    emulation = Emulation(clock, RUN_SECONDS)
    emulation.apply(f"trainer-runtime-{runtime}.yaml")
    emulation.api.create("trainjobs", trainjob("train", runtime), namespace=NS)
    emulation.run()
    assert emulation.conditions("trainjobs", "train").get("Complete") == "True"
    assert set(emulation.phases("train-")) == {"Succeeded"}
    assert len(emulation.phases("train-node-")) == 2


def test_without_run_seconds_the_trainjob_runs_until_stopped(clock):
    emulation = Emulation(clock, None)
    emulation.apply("trainer-runtime-torch-distributed.yaml")
    emulation.api.create("trainjobs", trainjob("train", "torch-distributed"), namespace=NS)
    emulation.run()
    assert "Complete" not in emulation.conditions("trainjobs", "train")
    assert emulation.phases("train-node-") == ["Running", "Running"]


def test_the_shipped_rayjob_completes_given_run_seconds_and_its_cluster_keeps_running(clock):
    emulation = Emulation(clock, RUN_SECONDS)
    emulation.apply("rayjob.yaml")
    emulation.run()
    status = emulation.api.get(RAYJOBS, "rayjob-sample", namespace=NS)["status"]
    assert (status["jobDeploymentStatus"], status["jobStatus"]) == ("Complete", "SUCCEEDED")
    cluster = status["rayClusterName"]
    assert emulation.phases(f"{cluster}-") == ["Running", "Running"], "the head and the worker serve on"
    assert emulation.api.get("configmaps", "ray-job-code-sample", namespace=NS)["data"]["sample_code.py"]


def test_the_shipped_leaderworkerset_serves_on_whatever_the_run_seconds(clock):
    emulation = Emulation(clock, RUN_SECONDS)
    emulation.apply("leaderworkerset.yaml")
    emulation.run()
    assert emulation.phases("leaderworkerset-sample-") == ["Running"] * 12
