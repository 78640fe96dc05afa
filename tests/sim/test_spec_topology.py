"""Topology in the scenario file: node groups labelled in nested domains (zones, racks, NVLink
cliques), and workloads whose pods declare a topology rule."""

import pytest

from gangkeeper import names
from sim.spec import SpecError, load, node_manifests, submissions

ZONE, RACK, CLIQUE = "topology.kubernetes.io/zone", "example.com/rack", "nvidia.com/gpu.clique"


def labels(spec_text):
    return {n["metadata"]["name"]: n["metadata"]["labels"] for n in node_manifests(load(spec_text))}


def test_four_racks_of_eight_nodes_per_zone():
    nodes = labels(f"""
nodes:
  - count: 64
    topology:
      - {{label: {ZONE}, nodes: 32, values: [a, b]}}
      - {{label: {RACK}, nodes: 8}}
""")
    assert len(nodes) == 64
    racks = {}
    for name, node_labels in nodes.items():
        racks.setdefault(node_labels[RACK], set()).add(node_labels[ZONE])
    assert sorted(racks, key=lambda r: int(r.split("-")[1])) == [f"rack-{i}" for i in range(8)]
    assert all(len(zones) == 1 for zones in racks.values())
    assert [racks[f"rack-{i}"] for i in (0, 3, 4, 7)] == [{"a"}, {"a"}, {"b"}, {"b"}]
    assert nodes["node-0"]["kubernetes.io/hostname"] == "node-0"


def test_cliques_per_node_numbered_on_across_groups_beside_fixed_labels():
    nodes = labels(f"""
nodes:
  - {{count: 4, namePrefix: gb, labels: {{pool: gb200}}, topology: [{{label: {CLIQUE}, nodes: 2, prefix: nvl}}]}}
  - {{count: 2, namePrefix: gc, topology: [{{label: {CLIQUE}, nodes: 2, prefix: nvl}}]}}
  - {{count: 1, namePrefix: plain}}
""")
    assert [nodes[f"gb-{i}"][CLIQUE] for i in range(4)] == ["nvl-0", "nvl-0", "nvl-1", "nvl-1"]
    assert [nodes[f"gc-{i}"][CLIQUE] for i in range(2)] == ["nvl-2", "nvl-2"]
    assert nodes["gb-0"]["pool"] == "gb200" and CLIQUE not in nodes["plain-0"]


def test_the_default_prefix_is_the_labels_last_part():
    nodes = labels(f"nodes: [{{count: 2, topology: [{{label: {CLIQUE}, nodes: 1}}]}}]")
    assert [nodes["node-0"][CLIQUE], nodes["node-1"][CLIQUE]] == ["gpu.clique-0", "gpu.clique-1"]


@pytest.mark.parametrize("level, message", [
    ({"label": RACK, "nodes": 3}, r"nodes\[0\].topology\[0\].nodes: 3 does not divide the group's count \(8\)"),
    ({"label": "Not A Key", "nodes": 2}, r"nodes\[0\].topology\[0\].label: 'Not A Key' is not a label key; write"),
    ({"label": RACK, "nodes": 4, "values": ["a"]}, r"topology\[0\].values: 1 values for 2 domains of 4 nodes"),
    ({"label": RACK, "nodes": 4, "size": 1}, r"topology\[0\].size: unknown field"),
])
def test_a_bad_level_is_refused_naming_the_field(level, message):
    with pytest.raises(SpecError, match=message):
        load({"nodes": [{"count": 8, "topology": [level]}]}.__repr__().replace("'", '"'))


def test_inner_domains_must_divide_the_outer_ones():
    with pytest.raises(SpecError, match=r"topology\[2\].nodes: 2 does not divide topology\[1\].nodes \(3\)"):
        load(f"nodes: [{{count: 12, topology: [{{label: {ZONE}, nodes: 6}}, {{label: {RACK}, nodes: 3}}, "
             f"{{label: {CLIQUE}, nodes: 2}}]}}]")


def test_a_workloads_topology_is_on_its_pods():
    spec = load(f"""
nodes: [{{count: 1}}]
workloads:
  - {{kind: Job, name: train, size: 8, topology: {{required: {ZONE}, preferred: {RACK},
                                                  sliceRequired: {CLIQUE}, sliceSize: 4}}}}
  - {{kind: Job, name: plain, size: 2}}
""")
    train, plain = (s.manifest["spec"]["template"]["metadata"]["annotations"] for s in submissions(spec))
    assert {k: v for k, v in train.items() if k.startswith("gangkeeper.io/")} == {
        names.TOPOLOGY_REQUIRED_ANNOTATION: ZONE, names.TOPOLOGY_PREFERRED_ANNOTATION: RACK,
        names.TOPOLOGY_SLICE_REQUIRED_ANNOTATION: CLIQUE, names.TOPOLOGY_SLICE_SIZE_ANNOTATION: "4"}
    assert not any(k.startswith("gangkeeper.io/topology") for k in plain)


@pytest.mark.parametrize("topology, message", [
    ({"sliceRequired": CLIQUE}, r"workloads\[0\].topology.sliceSize: sliceRequired and sliceSize go together"),
    ({"sliceRequired": CLIQUE, "sliceSize": 3}, r"workloads\[0\].topology.sliceSize: 3 does not divide size 8"),
    ({"required": "zone/"}, r"workloads\[0\].topology.required: 'zone/' is not a label key"),
    ({"zone": "a"}, r"workloads\[0\].topology.zone: unknown field"),
])
def test_a_bad_workload_topology_is_refused_naming_the_field(topology, message):
    text = repr({"nodes": [{"count": 1}], "workloads": [{"kind": "Job", "size": 8, "topology": topology}]})
    with pytest.raises(SpecError, match=message):
        load(text.replace("'", '"'))
