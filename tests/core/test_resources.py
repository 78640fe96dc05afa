from fractions import Fraction

from gangkeeper.resources import (
    accelerator_count,
    accelerators,
    add_into,
    as_scheduled,
    is_accelerator,
    pod_requests,
    shortfall,
    subtract,
)
from tests import builders


def container(name="main", requests=None, limits=None, restart_policy=None):
    return builders.container(name, requests=requests, limits=limits,
                              **({"restartPolicy": restart_policy} if restart_policy else {}))


def pod(containers, init_containers=(), overhead=None):
    return builders.pod("p", namespace=None, containers=list(containers), initContainers=list(init_containers),
                        **({"overhead": overhead} if overhead else {}))


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


def test_as_scheduled_rounds_cpu_up_to_a_millicore_and_the_rest_to_a_unit():
    assert as_scheduled({"cpu": Fraction(1, 2500), "memory": Fraction(3, 2), "nvidia.com/gpu": Fraction(8)}) == {
        "cpu": Fraction(1, 1000), "memory": 2, "nvidia.com/gpu": 8}
    assert as_scheduled({"cpu": Fraction(3, 2)}) == {"cpu": Fraction(3, 2)}


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


def test_shortfall_counts_a_resource_not_free_at_all_in_full():
    assert shortfall({"example.com/fpga": Fraction(2), "cpu": Fraction(0)}, {}) == {"example.com/fpga": 2}


def test_adding_into_nothing_held_gives_the_value_as_a_fraction():
    target = {"cpu": Fraction(1)}
    add_into(target, {"cpu": Fraction(1, 2), "memory": Fraction(3), "pods": 1})
    assert target == {"cpu": Fraction(3, 2), "memory": 3, "pods": 1}
    assert all(type(value) is Fraction for value in target.values())


def test_subtracting_what_is_not_held_goes_below_zero():
    assert subtract({"cpu": Fraction(1)}, {"cpu": Fraction(3), "memory": Fraction(2)}) == {"cpu": -2, "memory": -2}


def test_accelerator_count_is_the_exact_sum_cut_to_a_whole_number():
    shared = {"cpu": Fraction(4), "nvidia.com/gpu": Fraction(2)}
    half = {"nvidia.com/gpu": Fraction(1, 2), "gpu.intel.com/i915": Fraction(1, 4)}
    members = [shared, shared, dict(shared), half, half, {"nvidia.com/gpu": Fraction(0)}, {}]
    # 2 + 2 + 2 + 3/4 + 3/4 = 7.5: each set as often as it comes, fractions added exactly.
    assert accelerator_count(members) == 7
    assert accelerator_count([half] * 4) == 3
    assert accelerator_count([shared], ["example.com/*"]) == 0
    assert accelerator_count([]) == 0


def test_accelerator_count_counts_requests_made_as_they_are_read():
    # Sets made one after the other and dropped may share an address: each is counted for itself.
    assert accelerator_count({"nvidia.com/gpu": Fraction(n)} for n in range(1, 5)) == 10
