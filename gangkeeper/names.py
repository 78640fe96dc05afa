"""Every label, annotation, gate and API name gangkeeper reads or writes.

Nothing else in the code base spells these strings: import them from here. Keys that belong to
other projects (Kubeflow, JobSet, Kueue, Volcano, scheduler-plugins) are listed with where
they come from, so that a change upstream is a one-line change here.
"""

DOMAIN = "gangkeeper.io"

# --- ours (see docs/design.md, "Names") ---------------------------------------------------------
ENFORCE_LABEL = f"{DOMAIN}/enforce"
ENFORCE_VALUE = "true"
GROUP_LABEL = f"{DOMAIN}/group"
GROUP_SOURCE_ANNOTATION = f"{DOMAIN}/group-source"
MIN_COUNT_ANNOTATION = f"{DOMAIN}/min-count"
SCHEDULE_TIMEOUT_ANNOTATION = f"{DOMAIN}/schedule-timeout-seconds"
# Where a group's members must or should sit (issue 13), each the key of a node label naming the
# domains (topology.kubernetes.io/zone, a rack, an NVLink clique): on every member as set in its pod
# template, or a Gang's `spec.topology` (GANG_TOPOLOGY_FIELDS). Slices: consecutive runs of
# `…-slice-size` members, in their index order, each within one domain of `…-slice-required`.
TOPOLOGY_REQUIRED_ANNOTATION = f"{DOMAIN}/topology-required"
TOPOLOGY_PREFERRED_ANNOTATION = f"{DOMAIN}/topology-preferred"
TOPOLOGY_SLICE_REQUIRED_ANNOTATION = f"{DOMAIN}/topology-slice-required"
TOPOLOGY_SLICE_SIZE_ANNOTATION = f"{DOMAIN}/topology-slice-size"
SCHEDULING_GATE = f"{DOMAIN}/gang"
RESERVED_NODE_ANNOTATION = f"{DOMAIN}/reserved-node"
# When the controller removed the gate (RFC 3339, written in the same patch): the bind timeout
# counts from it, so a restarted or newly elected controller keeps the same deadline.
RELEASED_AT_ANNOTATION = f"{DOMAIN}/released-at"

# On an owner the controller suspended to roll its group back: who suspended it (the value below)
# and when the controller resumes it (RFC 3339). Both are durable, so a restarted or new leader
# resumes it on time; the resume patch removes them. An owner suspended without them is someone
# else's: gangkeeper never resumes it.
SUSPENDED_BY_ANNOTATION = f"{DOMAIN}/suspended-by"
SUSPENDED_BY_VALUE = "gangkeeper"
RESUME_AT_ANNOTATION = f"{DOMAIN}/resume-at"

# On the Gangs the controller creates: it deletes those that have no owner once their group is gone
# (an owned Gang goes with its owner); a Gang a user created is never deleted.
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "gangkeeper"

# Capacity asked of an autoscaler for a waiting group (issue 24, `--capacity-provisioning`): on the
# ProvisioningRequests, PodTemplates and placeholder pods the controller creates (each owned by the
# group's Gang), the uid of that Gang. A pod carrying it is a placeholder, never a member: the webhook
# lets only the controller create one and never gates it, and no group counts it.
CAPACITY_FOR_LABEL = f"{DOMAIN}/capacity-for"
# Which attempt of asking for the group's capacity an object belongs to ("1", "2", …): a retry after a
# failed or expired request makes new objects, so that the old ones can go while the new ones stand.
CAPACITY_ATTEMPT_LABEL = f"{DOMAIN}/capacity-attempt"
# The PriorityClass of placeholder pods (deploy/ ships it): below every real pod's (0 and up), so that
# every real pod preempts them, yet at or above cluster-autoscaler's expendable-pods cutoff (-10: it
# adds no node for a pod below it), as its FAQ's overprovisioning pause pods; and `preemptionPolicy:
# Never`, so that they preempt nothing.
PLACEHOLDER_PRIORITY_CLASS = "gangkeeper-placeholder"
PLACEHOLDER_PRIORITY = -1
PLACEHOLDER_IMAGE = "registry.k8s.io/pause:3.10"

GANG_GROUP = DOMAIN
GANG_VERSION = "v1alpha1"
GANG_KIND = "Gang"
GANG_PLURAL = "gangs"

DEFAULT_NAMESPACE = "gangkeeper"
# The objects deploy/base creates; flags default to them so that bare commands work in-cluster.
WEBHOOK_SERVICE = "gangkeeper-webhook"
WEBHOOK_TLS_SECRET = "gangkeeper-webhook-tls"
WEBHOOK_CONFIGURATION = "gangkeeper"
CONTROLLER_LEASE = "gangkeeper-controller"
CONTROLLER_SERVICE_ACCOUNT = "gangkeeper-controller"
DEFAULT_CONTROLLER_USERNAME = f"system:serviceaccount:{DEFAULT_NAMESPACE}:{CONTROLLER_SERVICE_ACCOUNT}"
NEVER_ENFORCED_NAMESPACES = frozenset({"kube-system"})

MIN_COUNT_RANGE = (1, 100_000)
# A slice is never bigger than a group.
SLICE_SIZE_RANGE = MIN_COUNT_RANGE
# The node label of zones, the cluster-wide default domain of a group without a topology rule (`--zone-label`).
ZONE_LABEL = "topology.kubernetes.io/zone"

# The four topology annotations and the Gang's `spec.topology` fields saying the same, in the
# order of `controller.model.members.TopologyRule`'s fields (required, preferred, slice_required, slice_size).
TOPOLOGY_ANNOTATIONS = (TOPOLOGY_REQUIRED_ANNOTATION, TOPOLOGY_PREFERRED_ANNOTATION,
                        TOPOLOGY_SLICE_REQUIRED_ANNOTATION, TOPOLOGY_SLICE_SIZE_ANNOTATION)
GANG_TOPOLOGY_FIELDS = ("required", "preferred", "sliceRequired", "sliceSize")

# Groups of groups (issue 25): a Gang names its parent Gang (`spec.parent`, same namespace), and a
# parent, which has no members of its own, how many of its children must all be placeable together
# (`spec.minGroupCount`). Trees are at most TREE_DEPTH_MAX deep (the parent and its children: 2),
# as native 1.37 CompositePodGroups are.
TREE_DEPTH_MAX = 4
# A workload's pods (or the workload itself) may name their group's parent Gang with this label, as
# a Gang does with `spec.parent`: two workloads (the prefill and the decode Deployments of
# disaggregated inference) tied into one tree, the Gangs the controller makes for them naming it.
PARENT_LABEL = f"{DOMAIN}/parent"
# On a workload that makes one child group per part (a JobSet: TREE_BY_REPLICATED_JOB, one per
# replicated job; a LeaderWorkerSet: TREE_BY_REPLICA_GROUP, one per replica group) under a parent Gang the controller makes for it, named after it and owned by it:
# how many children must all be placeable together (MIN_GROUP_COUNT_ANNOTATION, default all of them)
# and the parent's domain (the workload's own TOPOLOGY_REQUIRED_ANNOTATION / _PREFERRED_ANNOTATION).
TREE_ANNOTATION = f"{DOMAIN}/tree"
TREE_BY_REPLICATED_JOB = "replicatedJob"
TREE_BY_REPLICA_GROUP = "replicaGroup"  # a LeaderWorkerSet: one child per replica group
MIN_GROUP_COUNT_ANNOTATION = f"{DOMAIN}/min-group-count"
MIN_GROUP_COUNT_RANGE = (1, 1_000)
# Topology labels from the coarsest to the finest, per family: a child's topology may not name a
# label coarser than its parent's of the same family (a child's zone while its parent asks for one
# rack). Labels of different families, or unknown ones, are not compared.
TOPOLOGY_LEVELS = (
    ("topology.kubernetes.io/region", "topology.kubernetes.io/zone", "kubernetes.io/hostname"),
    ("topology.kubernetes.io/zone", "cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock",
     "cloud.google.com/gce-topology-host", "kubernetes.io/hostname"),
    ("topology.kubernetes.io/zone", "topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2",
     "topology.k8s.aws/network-node-layer-3", "kubernetes.io/hostname"),
    ("topology.kubernetes.io/zone", "network.topology.nvidia.com/core", "network.topology.nvidia.com/spine",
     "network.topology.nvidia.com/leaf", "network.topology.nvidia.com/accelerator", "kubernetes.io/hostname"),
    ("topology.kubernetes.io/zone", "nvidia.com/gpu.clique", "kubernetes.io/hostname"),
)

# The pin: required node affinity on the node's name, added to every existing term.
PIN_FIELD = "metadata.name"

# --- how a group was found: the value of GROUP_SOURCE_ANNOTATION ---------------------------
SOURCE_EXPLICIT = "explicit"
SOURCE_NATIVE_POD_GROUP = "native-podgroup"
SOURCE_PLUGINS_POD_GROUP = "scheduler-plugins-podgroup"
SOURCE_VOLCANO_POD_GROUP = "volcano-podgroup"
SOURCE_PYTORCHJOB = "pytorchjob"
SOURCE_JOBSET = "jobset"
SOURCE_MPIJOB = "mpijob"
SOURCE_JOB = "job"
SOURCE_LEADERWORKERSET = "leaderworkerset"
SOURCE_RAYCLUSTER = "raycluster"
SOURCE_ACCELERATOR_POD = "accelerator-pod"

# --- Kubernetes ----------------------------------------------------------------------------
# Label the 1.37 guides put on members of a native gang (we only read it).
NATIVE_POD_GROUP_LABEL = "scheduling.k8s.io/pod-group"
NATIVE_POD_GROUP_API = ("scheduling.k8s.io", "v1beta1", "podgroups")
# The kind of every PodGroup: the native one, scheduler-plugins' and Volcano's.
POD_GROUP_KIND = "PodGroup"
# batch/v1 Job pods: kubernetes/pkg/controller/job (labels set since 1.27 with the prefix).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
JOB_CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_API = ("batch", "v1", "jobs")
JOB_KIND = "Job"

# --- scheduler-plugins coscheduling and Volcano --------------------------------------------
# k8s.io/api resource/v1 (DRA): the claim the scheduler makes for extended resources a
# DeviceClass serves (KEP-5004), and the extended resource every DeviceClass serves by its name.
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
IMPLICIT_EXTENDED_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"

# sigs.k8s.io/scheduler-plugins apis/scheduling/v1alpha1: PodGroupLabel.
PLUGINS_POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
PLUGINS_POD_GROUP_API = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")
# volcano.sh/apis pkg/apis/scheduling/v1beta1: KubeGroupNameAnnotationKey.
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_POD_GROUP_API = ("scheduling.volcano.sh", "v1beta1", "podgroups")

# --- Kubeflow training operator (kubeflow/training-operator v1) ----------------------------
# pkg/apis/kubeflow.org/v1/common_types.go: JobNameLabel, ReplicaTypeLabel, ReplicaIndexLabel,
# JobRoleLabel, OperatorNameLabel. Pods are owned (controller: true) by the PyTorchJob.
KUBEFLOW_JOB_NAME_LABEL = "training.kubeflow.org/job-name"
KUBEFLOW_REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
KUBEFLOW_REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"
KUBEFLOW_JOB_ROLE_LABEL = "training.kubeflow.org/job-role"
KUBEFLOW_OPERATOR_NAME_LABEL = "training.kubeflow.org/operator-name"
PYTORCHJOB_API = ("kubeflow.org", "v1", "pytorchjobs")
PYTORCHJOB_KIND = "PyTorchJob"

# --- Kubeflow MPI operator (kubeflow/mpi-operator, pkg/apis/kubeflow/v2beta1, pkg/controller) --
# Its pods carry the training operator's job-name and job-role labels (`launcher`, `worker`), not
# the replica type. Workers are owned (controller) by the MPIJob; the launcher pod by the Job
# `<mpijob>-launcher`, which the MPIJob controls. `launcherCreationPolicy: WaitForWorkersReady`
# creates that Job only once every worker is Ready.
MPIJOB_API = ("kubeflow.org", "v2beta1", "mpijobs")
MPIJOB_KIND = "MPIJob"
MPI_LAUNCHER, MPI_WORKER = "launcher", "worker"
MPI_LAUNCHER_SUFFIX = "-launcher"
MPI_WAIT_FOR_WORKERS_READY = "WaitForWorkersReady"

# --- Kubeflow Trainer v2 (kubeflow/trainer, pkg/constants) ----------------------------------
# A TrainJob runs as a JobSet of its name. The runtimes label each replicated job's Job template
# with its step (dataset-initializer, model-initializer, trainer): the Jobs carry it, their pods
# do not. The initializers' replicated jobs are named after their step (pkg/constants
# DatasetInitializer, ModelInitializer), and that name reaches every pod as JobSet's label.
TRAINER_ANCESTOR_STEP_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER_INITIALIZER_STEPS = frozenset({"dataset-initializer", "model-initializer"})
TRAINJOB_API = ("trainer.kubeflow.org", "v1alpha1", "trainjobs")
TRAINJOB_KIND = "TrainJob"

# --- JobSet (kubernetes-sigs/jobset, api/jobset/v1alpha2/jobset_types.go) -------------------
# JobSet copies these onto its Jobs and their pods as labels and annotations.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
JOBSET_RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/restart-attempt"
JOBSET_REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOBSET_REPLICATED_JOB_REPLICAS_LABEL = "jobset.sigs.k8s.io/replicatedjob-replicas"
JOBSET_JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
JOBSET_GLOBAL_REPLICAS_LABEL = "jobset.sigs.k8s.io/global-replicas"
JOBSET_JOB_GLOBAL_INDEX_LABEL = "jobset.sigs.k8s.io/job-global-index"
JOBSET_JOB_KEY_LABEL = "jobset.sigs.k8s.io/job-key"
JOBSET_API = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
JOBSET_KIND = "JobSet"

# --- LeaderWorkerSet (kubernetes-sigs/lws, api/leaderworkerset/v1/leaderworkerset_types.go) -
# Its pods come from StatefulSets (the leaders' owned by the LWS, each leader's workers' by the
# leader pod). The name, the worker index (`0` on leaders) and the template revision come with
# the pod templates, and so does the group index on workers; on leaders LWS's own pod webhook
# adds the group index at CREATE, which gangkeeper's webhook may run before.
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
LWS_WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_REVISION_LABEL = "leaderworkerset.sigs.k8s.io/template-revision-hash"
LWS_LEADER_WORKER_INDEX = "0"
LWS_LEADER_READY = "LeaderReady"
LWS_API = ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets")
LWS_KIND = "LeaderWorkerSet"
# kubernetes pkg/controller/statefulset: what the StatefulSet controller puts on every pod it makes
# (the pod-index label since 1.28).
STATEFULSET_POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
STATEFULSET_POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"

# --- KubeRay (ray-project/kuberay, ray-operator/controllers/ray/utils/constant.go) ---------
# The RayCluster controller labels every pod it makes with its cluster, node type and group
# (`headgroup` for the head) and controls it; a RayJob's submitter Job and its pod template carry
# the originated-from labels of the RayJob, and no node type.
RAY_CLUSTER_LABEL = "ray.io/cluster"
RAY_NODE_TYPE_LABEL = "ray.io/node-type"
RAY_GROUP_LABEL = "ray.io/group"
RAY_HEAD, RAY_WORKER = "head", "worker"
RAY_HEAD_GROUP = "headgroup"
RAY_ORIGINATED_FROM_CRD_LABEL = "ray.io/originated-from-crd"
RAY_ORIGINATED_FROM_NAME_LABEL = "ray.io/originated-from-cr-name"
RAYCLUSTER_API = ("ray.io", "v1", "rayclusters")
RAYCLUSTER_KIND = "RayCluster"
RAYJOB_API = ("ray.io", "v1", "rayjobs")
RAYJOB_KIND = "RayJob"

# --- Kueue (kubernetes-sigs/kueue, pkg/controller/constants) -------------------------------
KUEUE_MANAGED_LABEL = "kueue.x-k8s.io/managed"
KUEUE_QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_PREFIX = "kueue.x-k8s.io/"

# --- accelerators: extended resources that make a pod a training pod ----------------------
# A trailing "*" matches any name with that prefix.
DEFAULT_ACCELERATORS = (
    "nvidia.com/gpu",
    "amd.com/gpu",
    "gpu.intel.com/*",
    "habana.ai/gaudi",
    "aws.amazon.com/neuron*",
    "google.com/tpu",
)

# --- cluster-autoscaler's ProvisioningRequest (kubernetes/autoscaler, autoscaling.x-k8s.io/v1) ---
# apis/provisioningrequest/autoscaling.x-k8s.io/v1: the API, its classes and conditions; pods that
# consume a request carry both annotations (provreq.ProvisioningRequestPodAnnotationKey,
# ProvisioningClassPodAnnotationKey), and the autoscaler counts them against its booking.
PROVISIONING_REQUEST_API = ("autoscaling.x-k8s.io", "v1", "provisioningrequests")
PROVISIONING_REQUEST_KIND = "ProvisioningRequest"
BEST_EFFORT_ATOMIC_SCALE_UP = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CHECK_CAPACITY = "check-capacity.autoscaling.x-k8s.io"
CONSUME_PROVISIONING_REQUEST_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
PROVISIONING_CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
# provisioningrequest/conditions: `Provisioned=False` for a request it cannot serve now (it keeps
# trying by itself, and never says that the request is beyond its node groups' max), and the
# `BookingExpired` of a booking its consumers took (no failure).
CAPACITY_NOT_FOUND_REASON = "CapacityIsNotFound"
BOOKING_CONSUMED_REASON = "CapacityBookingConsumed"
