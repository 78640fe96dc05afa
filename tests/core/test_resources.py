from fractions import Fraction

from gangkeeper.resources import accelerators, is_accelerator, pod_requests, shortfall


def container(name="main", requests=None, limits=None, restart_policy=None):
    spec = {"name": name, "resources": {}}
    if requests is not None:
        spec["resources"]["requests"] = requests
    if limits is not None:
        spec["resources"]["limits"] = limits
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def pod(containers, init_containers=(), overhead=None):
    spec = {"containers": list(containers), "initContainers": list(init_containers)}
    if overhead:
        spec["overhead"] = overhead
    return {"metadata": {"name": "p"}, "spec": spec}


def test_app_containers_add_up():
    requests = pod_requests(pod([container(requests={"cpu": "1", "nvidia.com/gpu": "4"}),
                                 container("b", requests={"cpu": "500m", "nvidia.com/gpu": "4"})]))
    assert requests == {"cpu": Fraction(3, 2), "nvidia.com/gpu": Fraction(8)}


def test_request_defaults_from_limit_like_the_api_server():
    assert pod_requests(pod([container(limits={"nvidia.com/gpu": "2"})])) == {"nvidia.com/gpu": 2}


def test_an_init_container_step_larger_than_the_app_containers_decides():
    requests = pod_requests(pod([container(requests={"cpu": "1"})],
                                [container("init", requests={"cpu": "3"})]))
    assert requests == {"cpu": 3}


def test_sidecars_run_beside_app_containers_and_later_init_steps():
    sidecar = container("proxy", requests={"cpu": "1"}, restart_policy="Always")
    late_init = container("migrate", requests={"cpu": "2"})
    requests = pod_requests(pod([container(requests={"cpu": "1"})], [sidecar, late_init]))
    # app + sidecar = 2; the init step runs beside the sidecar started before it = 3.
    assert requests == {"cpu": 3}


def test_overhead_is_added_once():
    requests = pod_requests(pod([container(requests={"memory": "1Gi"})], overhead={"memory": "128Mi"}))
    assert requests == {"memory": 2**30 + 128 * 2**20}


def test_accelerator_patterns_match_families():
    assert is_accelerator("nvidia.com/gpu")
    assert is_accelerator("gpu.intel.com/i915")
    assert is_accelerator("aws.amazon.com/neuroncore")
    assert not is_accelerator("cpu")
    assert not is_accelerator("example.com/fpga")
    assert accelerators({"cpu": Fraction(4), "nvidia.com/gpu": Fraction(8)}) == {"nvidia.com/gpu": 8}


def test_shortfall_names_only_what_is_missing():
    assert shortfall({"cpu": Fraction(4), "nvidia.com/gpu": Fraction(8)},
                     {"cpu": Fraction(8), "nvidia.com/gpu": Fraction(6)}) == {"nvidia.com/gpu": 2}
