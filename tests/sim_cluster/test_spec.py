"""The scenario file: what it accepts, and errors that say what to write instead."""

import pytest

from sim.spec import SpecError, load, node_groups, node_manifests, submissions

GOOD = """
nodes:
  - {count: 2, gpusPerNode: 4, cpu: "32", memory: 256Gi, labels: {pool: a}, taints: [{key: k, effect: NoSchedule}]}
workloads:
  - {kind: PyTorchJob, name: llm, namespace: ml, size: 3, gpusPerPod: 1, durationSeconds: 60, submitSeconds: 10}
  - {kind: JobSet, size: 4, podsPerJob: 2, durationSeconds: 30}
  - {kind: Job, size: 2}
  - {kind: Pod, size: 2, gpusPerPod: 2}
"""


def problems(text):
    with pytest.raises(SpecError) as caught:
        load(text)
    return caught.value.problems


def test_a_good_spec_builds_nodes_and_workloads_in_submit_order():
    spec = load(GOOD)
    nodes = node_manifests(spec)
    assert [n["metadata"]["name"] for n in nodes] == ["node-0", "node-1"]
    assert nodes[0]["status"]["allocatable"] == {"cpu": "32", "memory": "256Gi", "pods": "110",
                                                 "nvidia.com/gpu": "4"}
    assert nodes[0]["spec"]["taints"] == [{"key": "k", "effect": "NoSchedule"}]
    assert nodes[0]["metadata"]["labels"] == {"pool": "a", "kubernetes.io/hostname": "node-0"}
    plan = submissions(spec)
    assert [(s.at, s.resource, s.manifest["metadata"]["name"]) for s in plan] == [
        (0.0, "jobsets", "jobset-1"), (0.0, "jobs", "job-2"), (0.0, "pods", "pod-3-0"), (0.0, "pods", "pod-3-1"),
        (10.0, "pytorchjobs", "llm")]
    replicas = plan[-1].manifest["spec"]["pytorchReplicaSpecs"]
    assert (replicas["Master"]["replicas"], replicas["Worker"]["replicas"]) == (1, 2)
    annotations = replicas["Worker"]["template"]["metadata"]["annotations"]
    assert annotations == {"sim.gangkeeper.io/world-size": "3", "sim.gangkeeper.io/duration-seconds": "60"}
    replicated = plan[0].manifest["spec"]["replicatedJobs"][0]
    assert (replicated["replicas"], replicated["template"]["spec"]["parallelism"]) == (2, 2)
    assert plan[2].manifest["metadata"]["labels"] == {"gangkeeper.io/group": "pod-3"}
    assert plan[2].manifest["metadata"]["annotations"]["gangkeeper.io/min-count"] == "2"


def test_every_problem_is_reported_with_field_value_and_what_is_accepted():
    found = problems("""
nodes:
  - {count: 0, cpu: lots, taints: [{key: k, effect: Sometimes}]}
workloads:
  - {kind: TFJob, size: 2}
  - {kind: Job, size: two, durationSeconds: -5}
""")
    assert found == [
        "nodes[0].count: 0 is out of range; use a whole number from 1 to 100000",
        "nodes[0].cpu: 'lots' is not a Kubernetes quantity (e.g. 2, 500m, 1.5, 16Gi, 512Mi, 1e3)",
        "nodes[0].taints[0].effect: 'Sometimes' is not a taint effect; use one of NoSchedule, PreferNoSchedule, "
        "NoExecute",
        "workloads[0].kind: 'TFJob' is not a workload kind; use one of PyTorchJob, JobSet, Job, Pod",
        "workloads[1].size: 'two' is not a whole number",
        "workloads[1].durationSeconds: -5.0 is out of range; use a number of seconds above 0",
    ]


def test_unknown_fields_list_the_accepted_ones():
    [problem] = problems("nodes: [{count: 1, gpus: 8}]")
    assert problem.startswith("nodes[0].gpus: unknown field (value 8); accepted fields: ")
    assert "gpusPerNode" in problem


def test_missing_and_empty_sections():
    assert problems("workloads: []") == ["nodes: Missing data for required field."]
    assert problems("nodes: []") == ["nodes: an empty list has no nodes; list at least one node group"]
    assert problems("- just a list") == [
        "spec: ['just a list'] is not a mapping; write a mapping with `nodes` and `workloads`"]
    assert problems("nodes: [")[0].startswith("spec: not valid YAML")


def test_pods_per_job_must_divide_the_size_and_is_for_jobsets_only():
    assert problems("nodes: [{count: 1}]\nworkloads: [{kind: JobSet, size: 5, podsPerJob: 2}]") == [
        "workloads[0].podsPerJob: 2 does not divide size 5; use a divisor of the size"]
    assert problems("nodes: [{count: 1}]\nworkloads: [{kind: Job, size: 4, podsPerJob: 2}]") == [
        "workloads[0].podsPerJob: 2 is only accepted for kind JobSet; remove it"]


def test_two_workloads_may_not_share_a_name():
    assert problems("nodes: [{count: 1}]\nworkloads: [{kind: Job, name: a, size: 1}, {kind: Job, name: a, size: 1}]") \
        == ["workloads[1].name: 'a' is already used by workloads[0]; give each Job in a namespace its own name"]


def test_names_must_be_dns_labels():
    assert problems("nodes: [{count: 1, namePrefix: GPU_Node}]") == [
        "nodes[0].namePrefix: 'GPU_Node' is not a DNS label; use lowercase letters, digits and '-'"]


def test_node_groups_for_the_autoscaler_have_a_shape_a_min_a_max_and_a_provisioning_time():
    spec = load("""
nodes: []
nodeGroups:
  - {name: pool, max: 4, gpusPerNode: 8, labels: {pool: a}, taints: [{key: k, effect: NoSchedule}]}
  - {name: spare, min: 1, max: 1, provisioningSeconds: 300}
""")
    pool, spare = node_groups(spec)
    assert (pool.name, pool.min_size, pool.max_size, pool.provisioning_seconds) == ("pool", 0, 4, 60.0)
    assert (spare.min_size, spare.max_size, spare.provisioning_seconds) == (1, 1, 300.0)
    node = pool.node("pool-3")
    assert node["metadata"] == {"name": "pool-3", "labels": {"pool": "a", "kubernetes.io/hostname": "pool-3",
                                                            "sim.gangkeeper.io/node-group": "pool"}}
    assert node["status"]["allocatable"] == {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"}
    assert node["spec"]["taints"] == [{"key": "k", "effect": "NoSchedule"}]
    assert node_manifests(spec) == [], "a group's nodes are the autoscaler's to make"


def test_node_groups_are_refused_with_what_to_write():
    assert problems("nodes: []\nnodeGroups: [{name: pool, min: 3, max: 2}]") == [
        "nodeGroups[0].min: 3 is above max 2; use a min from 0 to 2"]
    assert problems("nodes: []\nnodeGroups: [{name: pool}]") == ["nodeGroups[0].max: Missing data for required field."]
    [unknown] = problems("nodes: []\nnodeGroups: [{name: pool, max: 2, count: 2}]")
    assert unknown.startswith("nodeGroups[0].count: unknown field (value 2); accepted fields: ")
    assert "provisioningSeconds" in unknown and "namePrefix" not in unknown
    assert problems("nodes: [{count: 1}]\nnodeGroups: [{name: node, max: 2}]") == [
        "nodeGroups[0].name: 'node' is the namePrefix of nodes[0], whose nodes are named node-N too; give the group "
        "another name"]
    assert problems("nodes: []\nnodeGroups: [{name: a, max: 2}, {name: a, max: 3}]") == [
        "nodeGroups[1].name: 'a' is already the name of nodeGroups[0]; give each node group its own name"]
    assert problems("nodes: []\nnodeGroups: []") == ["nodes: an empty list has no nodes; list at least one node group"]
