"""What the emulated scheduler holds a pod to: `PodRequests` (init containers, sidecars, overhead),
requests only, in the whole millicores and units NodeResourcesFit counts."""

from fractions import Fraction

from sim.cluster import Cluster
from sim.resources import accelerators, pod_requests, scheduled_requests
from sim.scheduler import Scheduler
from sim.spec import load, node_manifests
from tests import builders

NS = "ml"


def container(name, restart_policy=None, **requests):
    return builders.container(name, image="busybox:1.36", requests=requests,
                              **({"restartPolicy": restart_policy} if restart_policy else {}))


def pod(name="p", containers=(), init=(), overhead=None):
    return builders.pod(name, namespace=NS, containers=list(containers), initContainers=list(init),
                        **({"overhead": overhead} if overhead else {}))


def test_containers_add_up():
    assert pod_requests(pod(containers=[container("a", cpu="1"), container("b", cpu="500m", memory="1Gi")])) == {
        "cpu": Fraction(3, 2), "memory": 2**30}


def test_an_init_container_larger_than_the_containers_sets_the_request():
    assert pod_requests(pod(containers=[container("main", cpu="1")], init=[container("warm", cpu="4")])) == {"cpu": 4}


def test_a_sidecar_runs_beside_the_containers_and_the_init_containers_after_it():
    sidecar = container("proxy", restart_policy="Always", cpu="1")
    before = container("before", cpu="2")
    after = container("after", cpu="2")
    assert pod_requests(pod(containers=[container("main", cpu="1")], init=[before, sidecar, after])) == {"cpu": 3}
    assert pod_requests(pod(containers=[container("main", cpu="1")], init=[sidecar])) == {"cpu": 2}


def test_overhead_comes_on_top():
    assert pod_requests(pod(containers=[container("main", cpu="1")], init=[container("warm", cpu="4")],
                            overhead={"cpu": "250m"})) == {"cpu": Fraction(17, 4)}


def test_limits_are_not_read_the_api_server_has_copied_them_into_requests():
    limited = {"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    assert pod_requests(pod(containers=[limited])) == {}


def test_the_scheduler_holds_whole_millicores_and_units():
    assert scheduled_requests(pod(containers=[container("a", cpu="0.4m", memory="1.5")])) == {
        "cpu": Fraction(1, 1000), "memory": 2}


def test_accelerators_are_the_requests_named_like_one():
    assert accelerators({"nvidia.com/gpu": Fraction(2), "gpu.intel.com/i915": Fraction(1), "cpu": Fraction(4),
                         "amd.com/gpu": Fraction(0)}) == {"nvidia.com/gpu": 2, "gpu.intel.com/i915": 1}


# --- on the emulated API server and scheduler ---------------------------------------------------

def scheduled(api, clock, node_spec, *pods):
    for node in node_manifests(load(node_spec)):
        api.create("nodes", node)
    cluster = Cluster(api, clock, [Scheduler(api)])
    for made in pods:
        api.create("pods", made, namespace=NS)
    cluster.settle()
    return {made["metadata"]["name"]: api.get("pods", made["metadata"]["name"], namespace=NS)["spec"].get("nodeName")
            for made in pods}


def test_a_pod_whose_init_container_asks_more_than_the_node_has_is_not_placed(api, clock):
    warm = pod("warm", containers=[container("main", cpu="1")], init=[container("warm", cpu="4")])
    assert scheduled(api, clock, "nodes: [{count: 1, gpusPerNode: 0, cpu: '3'}]", warm) == {"warm": None}


def test_two_pods_of_less_than_a_millicore_take_a_millicore_each(api, clock):
    """Kubernetes counts each pod's cpu in whole millicores, rounded up: 0.5m + 0.5m is 2m, not 1m."""
    tiny = [pod(f"tiny-{i}", containers=[container("main", cpu="0.5m")]) for i in range(2)]
    placed = scheduled(api, clock, "nodes: [{count: 1, gpusPerNode: 0, cpu: 1m}]", *tiny)
    assert placed == {"tiny-0": "node-0", "tiny-1": None}
