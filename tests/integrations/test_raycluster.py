"""KubeRay: a RayCluster's head and minimum workers are one gang, its extra workers elastic; a
RayJob's submitter joins no gang; a RayJob's cluster is rolled back through the RayJob when
KubeRay lets it be suspended."""

from gangkeeper import identity, names
from gangkeeper.integrations import job, raycluster, rayjob
from tests.integrations.pods import owner, pod

CLUSTER_UID = "6a1f0c3e-7b2d-4c8e-9f10-2a3b4c5d6e7f"
CLUSTER = "rayjob-sample-x7k2p"


def ray_pod(node_type, group, gpus=1):
    """A pod as the RayCluster controller makes it: labelled with its cluster, node type and group, owned by it."""
    labels = {names.RAY_CLUSTER_LABEL: CLUSTER, names.RAY_NODE_TYPE_LABEL: node_type, names.RAY_GROUP_LABEL: group,
              "ray.io/is-ray-node": "yes", "app.kubernetes.io/created-by": "kuberay-operator",
              names.RAY_ORIGINATED_FROM_CRD_LABEL: names.RAYJOB_KIND, names.RAY_ORIGINATED_FROM_NAME_LABEL: "rayjob-sample"}
    suffix = "head-q8w2e" if node_type == names.RAY_HEAD else f"{group}-worker-m4n5b"
    return pod(f"{CLUSTER}-{suffix}", labels, owners=[owner("RayCluster", CLUSTER, CLUSTER_UID, "ray.io/v1")],
               gpus=gpus)


def submitter_pod(labels=None):
    """RayJob rayjob-sample's submitter: a pod of the Job named after it, with the labels KubeRay puts on its template."""
    template_labels = {names.RAY_ORIGINATED_FROM_CRD_LABEL: names.RAYJOB_KIND,
                       names.RAY_ORIGINATED_FROM_NAME_LABEL: "rayjob-sample",
                       "app.kubernetes.io/created-by": "kuberay-operator"}
    return pod("rayjob-sample-abcde", {**template_labels, **(labels or {}), names.JOB_NAME_LABEL: "rayjob-sample",
                                       "controller-uid": "j-uid"},
               owners=[owner("Job", "rayjob-sample", "j-uid", "batch/v1")])


def cluster(spec, owners=()):
    return {"metadata": {"name": CLUSTER, "uid": CLUSTER_UID, "resourceVersion": "3",
                         "ownerReferences": list(owners)}, "spec": spec}


def workers(**group):
    return {"groupName": "gpu", "replicas": 1, "minReplicas": 1, "maxReplicas": 5, **group}


def test_the_head_and_every_worker_are_grouped_by_their_cluster_name_and_uid():
    head = identity.classify(ray_pod(names.RAY_HEAD, names.RAY_HEAD_GROUP, gpus=0), namespace="ml")
    worker = identity.classify(ray_pod(names.RAY_WORKER, "gpu"), namespace="ml")
    assert head.identity.name == worker.identity.name == f"{CLUSTER}-{CLUSTER_UID}"
    assert head.identity.source == worker.identity.source == names.SOURCE_RAYCLUSTER


def test_a_pod_that_only_claims_a_cluster_is_not_grouped_with_it():
    claimed = ray_pod(names.RAY_WORKER, "gpu")
    claimed["metadata"]["ownerReferences"] = []
    assert raycluster.group_of(claimed) is None
    unknown_type = ray_pod("redis", "gpu")
    assert raycluster.group_of(unknown_type) is None


def test_the_gang_is_the_head_and_each_groups_minimum():
    spec = {"workerGroupSpecs": [workers(replicas=3, minReplicas=2), workers(groupName="cpu", minReplicas=0)]}
    assert raycluster.declaration(cluster(spec))["sizes"] == {"": 3}


def test_a_multi_host_group_counts_its_hosts_and_a_suspended_group_none():
    spec = {"workerGroupSpecs": [workers(minReplicas=2, numOfHosts=4), workers(groupName="off", suspend=True)]}
    assert raycluster.size(spec) == 1 + 8


def test_min_replicas_above_max_replicas_counts_what_kuberay_runs():
    assert raycluster.min_workers(workers(minReplicas=4, maxReplicas=2)) == 2


def test_the_most_a_cluster_runs_is_the_head_and_the_workers_kuberay_keeps():
    spec = {"workerGroupSpecs": [workers(replicas=3, minReplicas=2, maxReplicas=5, numOfHosts=2),
                                 workers(groupName="above", replicas=9, maxReplicas=4),
                                 workers(groupName="below", replicas=0, minReplicas=2),
                                 workers(groupName="off", replicas=3, suspend=True)]}
    assert raycluster.max_count(spec) == 1 + 6 + 4 + 2
    assert raycluster.declaration(cluster(spec))["maxima"] == {"": 13}


def test_a_head_alone_is_a_gang_of_one():
    assert raycluster.size({}) == 1


def test_the_cluster_is_the_pods_controlling_owner_and_declares_their_group():
    assert raycluster.INTEGRATION.declarer("g", {}, (CLUSTER, CLUSTER_UID)) == (CLUSTER, CLUSTER_UID)
    assert raycluster.INTEGRATION.owns_pods


def test_a_standalone_cluster_is_its_own_switch():
    declared = raycluster.declaration(cluster({"suspend": False}))
    assert declared["suspend"].resource_version == "3" and not declared["suspend"].suspended
    assert "switch" not in declared
    assert raycluster.SUSPENSION.patch(cluster({}), True) == {"metadata": {"resourceVersion": "3"},
                                                              "spec": {"suspend": True}}


def test_a_rayjobs_cluster_names_the_rayjob_as_its_switch():
    declared = raycluster.declaration(cluster({}, [owner("RayJob", "rayjob-sample", "rj-uid", "ray.io/v1")]))
    assert declared["switch"] == ("rayjobs.ray.io", "rayjob-sample", "rj-uid")


def test_a_cluster_another_owner_controls_has_no_switch():
    declared = raycluster.declaration(cluster({}, [owner("RayService", "svc", "s-uid", "ray.io/v1")]))
    assert "switch" not in declared and "suspend" not in declared
    somebody_elses = owner("RayJob", "rayjob-sample", "rj-uid", "example.com/v1")
    assert rayjob.switch_of(cluster({}, [somebody_elses])) is None


def test_a_rayjob_offers_its_switch_only_when_kuberay_lets_it_be_suspended():
    def declared(spec):
        return rayjob.declaration({"metadata": {"name": "rayjob-sample", "resourceVersion": "9"}, "spec": spec})

    assert declared({"shutdownAfterJobFinishes": True})["suspend"].resource_version == "9"
    assert "suspend" not in declared({})  # shutdownAfterJobFinishes false: suspending it fails its validation
    assert "suspend" not in declared({"shutdownAfterJobFinishes": True, "clusterSelector": {"ray.io/cluster": "c"}})


def test_the_submitter_is_left_alone_before_the_job_rule_sees_it():
    found = identity.classify(submitter_pod(), namespace="ml")
    assert not found.is_member
    assert found.reason.startswith("RayJob rayjob-sample's submitter (ray.io/originated-from-crd=RayJob)")
    assert job.group_of(submitter_pod()) is not None  # which it would group, as a Job's pod


def test_a_user_template_for_the_submitter_is_still_left_alone():
    assert rayjob.group_of(submitter_pod({"team": "ml", "app": "submit"})) is not None


def test_only_a_rayjobs_submitter_is_left_alone():
    assert rayjob.group_of(ray_pod(names.RAY_HEAD, names.RAY_HEAD_GROUP)) is None  # a RayJob's cluster pod
    other_job = pod("train-abcde", {names.JOB_NAME_LABEL: "train"}, owners=[owner("Job", "train", "t", "batch/v1")])
    assert rayjob.group_of(other_job) is None
    assert rayjob.group_of(pod(labels={names.RAY_ORIGINATED_FROM_CRD_LABEL: names.RAYJOB_KIND})) is None
