"""A group sharing one ResourceClaim on a device several nodes reach, end to end on the emulated
cluster's virtual clock: gangkeeper's real webhook and its controller's loop in process
(`study.policies`), the emulated scheduler allocating the claim for the first member it binds
(`sim.dra`), `sim.invariants` checking every change.

Eight 8-GPU nodes; a network-attached device (`link-0`, one ResourceSlice whose `nodeSelector`
picks the nodes of one NVLink domain) reaches the last four of them. A Job of four 8-GPU pods shares
one claim on it: it can run only on those four, one pod per node, where packing by name alone
would put it on the first four. A Job of five such pods cannot run at all.
"""

import copy

from gangkeeper import names
from gangkeeper.controller.deciding.settings import Settings
from sim.api import ADMIN
from sim.clock import VirtualClock
from sim.cluster import emulated_cluster
from sim.invariants import Checker, Watch
from sim.reservations import GANGS
from sim.spec import load, submissions
from study.policies import GangkeeperController, gangkeeper_api

NS = "ml"
DRIVER = "link.example.com"
DOMAIN = "example.com/nvlink-domain"
CLAIM = "nvlink"


def spec(size: int) -> str:
    return f"""
nodes:
  - {{count: 4, gpusPerNode: 8}}
  - {{count: 4, gpusPerNode: 8, labels: {{{DOMAIN}: nvl-1}}}}
workloads: [{{kind: Job, name: train, namespace: {NS}, size: {size}, gpusPerPod: 8, durationSeconds: 600}}]
"""


REACHING = {f"node-{i}" for i in range(4, 8)}

DEVICE_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
                "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]}}
DOMAIN_SLICE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "nvl-1-links"},
                "spec": {"driver": DRIVER, "pool": {"name": "nvl-1", "generation": 1, "resourceSliceCount": 1},
                         "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                             {"key": DOMAIN, "operator": "In", "values": ["nvl-1"]}]}]},
                         "devices": [{"name": "link-0"}]}}
SHARED_CLAIM = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": CLAIM},
                "spec": {"devices": {"requests": [{"name": "link", "exactly": {
                    "deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 1}}]}}}


class SharedClaimCluster:
    """The emulated cluster with the domain's device published, the claim made and the Job
    submitted, its pods all naming the claim."""

    def __init__(self, size: int, settings: Settings = Settings()):
        self.clock = VirtualClock()
        self.start = self.clock.now()
        self.api, _ = gangkeeper_api(self.clock.now)
        self.api.create("namespaces", {"metadata": {"name": NS, "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
        self.watch = Watch(self.api, Checker(bind_timeout=settings.bind_timeout_seconds, reaction=30.0),
                           clock=self.clock.now)
        loaded = load(spec(size))
        self.cluster = emulated_cluster(self.api, self.clock, spec={**loaded, "workloads": []},
                                        extra=[GangkeeperController(self.api, clock=self.clock.now, settings=settings)])
        self.api.create("deviceclasses", DEVICE_CLASS, user=ADMIN)
        self.api.create("resourceslices", DOMAIN_SLICE, user=ADMIN)
        self.api.create("resourceclaims", SHARED_CLAIM, namespace=NS)
        (submission,) = submissions(loaded)
        job = copy.deepcopy(submission.manifest)
        pod_spec = job["spec"]["template"]["spec"]
        pod_spec["resourceClaims"] = [{"name": "link", "resourceClaimName": CLAIM}]
        pod_spec["containers"][0]["resources"]["claims"] = [{"name": "link"}]
        self.api.create("jobs", job, namespace=NS)

    def at(self, seconds: float) -> None:
        self.cluster.run_until(self.start + seconds)

    def bound_on(self) -> list[str | None]:
        return sorted((p["spec"].get("nodeName") for p in self.api.list("pods", namespace=NS)), key=str)

    def claim(self) -> dict:
        return self.api.get("resourceclaims", CLAIM, namespace=NS)

    def gang(self) -> dict:
        (gang,) = self.api.list(GANGS, namespace=NS)
        return gang


def test_a_group_sharing_a_claim_on_a_device_four_of_eight_nodes_reach_lands_on_those_four():
    cluster = SharedClaimCluster(size=4)
    cluster.at(120)
    assert cluster.bound_on() == sorted(REACHING), "one member on each node the device reaches"
    status = cluster.claim()["status"]
    assert status["allocation"]["devices"]["results"] == [
        {"request": "link", "driver": DRIVER, "pool": "nvl-1", "device": "link-0"}], "allocated once, for all"
    assert status["allocation"]["nodeSelector"] == DOMAIN_SLICE["spec"]["nodeSelector"]
    assert len(status["reservedFor"]) == 4
    assert not any(c["type"] == "RolledBack" for c in cluster.gang()["status"].get("conditions") or ())
    assert cluster.watch.violations() == []


def test_a_group_larger_than_the_nodes_the_device_reaches_waits_with_nothing_bound_and_the_claim_unallocated():
    cluster = SharedClaimCluster(size=5)
    cluster.at(600)
    assert cluster.bound_on() == [None] * 5
    assert "allocation" not in (cluster.claim().get("status") or {})
    (admitted,) = (c for c in cluster.gang()["status"]["conditions"] if c["type"] == "Admitted")
    assert admitted["reason"] == "NoFit"
    assert admitted["message"].startswith("4 of 5 waiting members placeable: none of the 4 eligible nodes with room "
                                          "can allocate the claims of train-")
    assert admitted["message"].endswith("(4 resourceclaim not available on the node)")
    assert cluster.watch.violations() == []
