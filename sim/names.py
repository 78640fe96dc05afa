"""Names that only the cluster emulation writes or reads.

`gangkeeper.names` owns every name the product uses; this module holds the rest: the emulation's
own annotations (how long a training run lasts, how many pods it needs) and the Kubernetes,
Kubeflow and JobSet names that the emulated kube-scheduler, kubelet and operators write but
gangkeeper never reads.
"""

SIM_DOMAIN = "sim.gangkeeper.io"
# On a pod (copied from the workload's pod template): seconds of progress a training run needs,
# counted only while all its pods run. Absent: the pod runs until deleted, like a server.
DURATION_ANNOTATION = f"{SIM_DOMAIN}/duration-seconds"
# On a pod: how many pods the training run needs running at once before any of them progresses.
WORLD_SIZE_ANNOTATION = f"{SIM_DOMAIN}/world-size"

# --- resources the emulated components serve ----------------------------------------------
PODS = "pods"
NODES = "nodes"
JOBS = "jobs"
PYTORCHJOBS = "pytorchjobs"
JOBSETS = "jobsets"
TRAINJOBS = "trainjobs"
TRAINING_RUNTIMES = "trainingruntimes"
CLUSTER_TRAINING_RUNTIMES = "clustertrainingruntimes"

# --- Kubernetes core ----------------------------------------------------------------------
DEFAULT_SCHEDULER = "default-scheduler"
GPU = "nvidia.com/gpu"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# Taints the node lifecycle controller puts on a node that is not Ready or is cordoned.
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
# The one node field a node selector term's `matchFields` may name.
NODE_NAME_FIELD = "metadata.name"

# --- batch/v1 Job controller (labels without the prefix are the pre-1.27 spellings it still writes)
JOB_API_VERSION = "batch/v1"
JOB_NAME_LEGACY_LABEL = "job-name"
JOB_CONTROLLER_UID_LEGACY_LABEL = "controller-uid"
JOB_COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"

# --- Kubeflow training operator -----------------------------------------------------------
PYTORCHJOB_API_VERSION = "kubeflow.org/v1"
PYTORCHJOB_OPERATOR_NAME = "pytorchjob-controller"
PYTORCH_CONTAINER = "pytorch"
PYTORCH_DEFAULT_PORT = 23456
PYTORCH_PORT_NAME = "pytorchjob-port"

# --- Kubeflow MPI operator (kubeflow/mpi-operator v2beta1) ----------------------------------
MPIJOBS = "mpijobs"
MPIJOB_API_VERSION = "kubeflow.org/v2beta1"
MPI_OPERATOR_NAME = "mpi-operator"

# --- JobSet -------------------------------------------------------------------------------
JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
JOBSET_JOB_RESTART_ATTEMPT_LABEL = "jobset.sigs.k8s.io/job-restart-attempt"

# --- Kubeflow Trainer v2 (kubeflow/trainer, pkg/constants and pkg/apis/trainer/v1alpha1) -----
TRAINER_GROUP = "trainer.kubeflow.org"
TRAINER_API_VERSION = f"{TRAINER_GROUP}/v1alpha1"
TRAINJOB_KIND = "TrainJob"
TRAINING_RUNTIME_KIND = "TrainingRuntime"
CLUSTER_TRAINING_RUNTIME_KIND = "ClusterTrainingRuntime"
# `spec.managedBy` of the TrainJobs the trainer controller reconciles (the CRD's default).
TRAINJOB_CONTROLLER_NAME = f"{TRAINER_GROUP}/trainjob-controller"
# The trainer step's replicated job and container; its rendezvous port.
TRAINER_NODE = "node"
TRAINER_PORT = 29500

# --- StatefulSet controller (kubernetes pkg/controller/statefulset) -------------------------
STATEFULSETS = "statefulsets"
STATEFULSET_API_VERSION = "apps/v1"
CONTROLLER_REVISION_HASH_LABEL = "controller-revision-hash"

# --- LeaderWorkerSet (kubernetes-sigs/lws): what its controllers and webhook write besides the
# labels gangkeeper reads (gangkeeper.names) -----------------------------------------------------
LEADERWORKERSETS = "leaderworkersets"
LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
LWS_GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"
LWS_SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"
LWS_REPLICAS_ANNOTATION = "leaderworkerset.sigs.k8s.io/replicas"
LWS_LEADER_NAME_ANNOTATION = "leaderworkerset.sigs.k8s.io/leader-name"
LWS_SUBDOMAIN_POLICY_ANNOTATION = "leaderworkerset.sigs.k8s.io/subdomainPolicy"
LWS_LEADER_ADDRESS_ENV = "LWS_LEADER_ADDRESS"
LWS_GROUP_SIZE_ENV = "LWS_GROUP_SIZE"
LWS_WORKER_INDEX_ENV = "LWS_WORKER_INDEX"

# --- resource.k8s.io/v1 (dynamic resource allocation) ---------------------------------------
NAMESPACES = "namespaces"
DEVICE_CLASSES = "deviceclasses"
RESOURCE_SLICES = "resourceslices"
RESOURCE_CLAIMS = "resourceclaims"
RESOURCE_CLAIM_TEMPLATES = "resourceclaimtemplates"
RESOURCE_API_VERSION = "resource.k8s.io/v1"
# On a claim the resourceclaim controller made from a template: the pod's claim entry it serves.
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
# On the claim the scheduler made for a pod's extended resources served by DRA (KEP-5004).
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
# Every DeviceClass also serves the extended resource of this prefix and its own name.
IMPLICIT_EXTENDED_RESOURCE_PREFIX = "deviceclass.resource.kubernetes.io/"
# Put on a claim by the scheduler when it allocates it; removed once nothing uses the claim.
CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"
ZONE_LABEL = "topology.kubernetes.io/zone"
# The pod condition of a pod on its way out through a disruption (preemption, eviction).
DISRUPTION_TARGET = "DisruptionTarget"

# --- cluster-autoscaler (kubernetes/autoscaler, cluster-autoscaler/apis/provisioningrequest v1) ---
NODE_GROUP_LABEL = f"{SIM_DOMAIN}/node-group"  # on every node of an autoscaled node group: the group's name
POD_TEMPLATES = "podtemplates"
PROVISIONING_REQUESTS = "provisioningrequests"
PROVISIONING_GROUP = "autoscaling.x-k8s.io"
PROVISIONING_API_VERSION = f"{PROVISIONING_GROUP}/v1"
CHECK_CAPACITY_CLASS = "check-capacity.autoscaling.x-k8s.io"
BEST_EFFORT_ATOMIC_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
# On a pod that consumes a ProvisioningRequest's capacity: the request's name, and its class.
CONSUME_PROVISIONING_REQUEST_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
DEPRECATED_CONSUME_ANNOTATION = "cluster-autoscaler.kubernetes.io/consume-provisioning-request"  # still read
PROVISIONING_CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
