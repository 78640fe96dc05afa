"""Devices in the scenario file: a DeviceClass per driver and a ResourceSlice per node, on the emulated cluster."""

from collections import Counter

import pytest

from sim.apiserver import APIServer
from sim.clock import VirtualClock
from sim.cluster import emulated_cluster
from sim.spec import SpecError, device_manifests, load

DRA_NODES = """
nodes:
  - {count: 2, gpusPerNode: 0, namePrefix: dra,
     devices: {count: 4, extendedResourceName: nvidia.com/gpu, attributes: {model: h100}}}
  - {count: 1, gpusPerNode: 0, namePrefix: cpu}
"""


def test_each_group_with_devices_gets_a_slice_per_node_and_its_driver_a_class():
    made = device_manifests(load(DRA_NODES))
    assert [(resource, m["metadata"]["name"]) for resource, m in made] == [
        ("deviceclasses", "gpu.example.com"), ("resourceslices", "dra-0-gpu.example.com"),
        ("resourceslices", "dra-1-gpu.example.com")]
    [(_, device_class), (_, first), _] = made
    assert device_class["spec"] == {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}],
                                    "extendedResourceName": "nvidia.com/gpu"}
    assert first["spec"]["nodeName"] == "dra-0" and first["spec"]["pool"] == {
        "name": "dra-0", "generation": 1, "resourceSliceCount": 1}
    assert first["spec"]["devices"][3] == {"name": "device-3", "attributes": {"model": {"string": "h100"}}}


def test_one_driver_cannot_serve_two_extended_resources():
    with pytest.raises(SpecError, match=r"nodes\[1\].devices.extendedResourceName: 'amd.com/gpu' differs"):
        load("""nodes: [{count: 1, devices: {count: 2, extendedResourceName: nvidia.com/gpu}},
                        {count: 1, devices: {count: 2, extendedResourceName: amd.com/gpu}}]""")
    with pytest.raises(SpecError, match="is not a driver name"):
        load("nodes: [{count: 1, devices: {count: 2, driver: GPU_DRIVER}}]")


def test_gpus_served_only_through_devices_run_where_the_devices_are():
    clock = VirtualClock()
    api = APIServer(clock=clock.now)
    spec = load(DRA_NODES + """
workloads:
  - {kind: Pod, name: train, namespace: ml, size: 10, gpusPerPod: 1}
""")
    api.create("namespaces", {"metadata": {"name": "ml"}})
    cluster = emulated_cluster(api, clock, spec=spec)
    cluster.run_until(clock.now() + 5)
    placed = Counter(p["spec"].get("nodeName") for p in api.list("pods", namespace="ml"))
    assert placed == {"dra-0": 4, "dra-1": 4, None: 2}
    claims = api.list("resourceclaims", namespace="ml")
    assert len(claims) == 8 and all(c["status"]["allocation"] for c in claims)
