"""The resources the emulated API server serves, described once.

Every path, discovery document, error message and admission request is derived from this
registry, so a resource is added in one place and served everywhere the same way.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()
    strategic_merge: bool = False  # built-in types accept strategic merge patches; custom resources don't

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def qualified_resource(self) -> str:
        """How the real server names the resource in messages: `pods`, `jobs.batch`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """How the real server names the kind in validation messages: `Pod`, `Job.batch`."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def group_version_kind(self) -> dict:
        return {"group": self.group, "version": self.version, "kind": self.kind}

    def group_version_resource(self) -> dict:
        return {"group": self.group, "version": self.version, "resource": self.plural}


_CORE = [
    Kind("", "v1", "Namespace", "namespaces", False, ("status",), ("ns",), True),
    Kind("", "v1", "Node", "nodes", False, ("status",), ("no",), True),
    Kind("", "v1", "Pod", "pods", True, ("status", "binding", "eviction"), ("po",), True),
    Kind("", "v1", "Event", "events", True, (), ("ev",), True),
    Kind("", "v1", "Secret", "secrets", True, (), (), True),  # the webhook TLS Secret `certs install` writes
    Kind("", "v1", "ConfigMap", "configmaps", True, (), ("cm",), True),  # shipped examples carry their code in one
    Kind("", "v1", "PodTemplate", "podtemplates", True, (), (), True),  # what a ProvisioningRequest's podSets name
    Kind("", "v1", "Binding", "bindings", True, (), (), True),  # create-only: binds the pod of the same name
    Kind("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, ("status",), ("pvc",), True),
    Kind("", "v1", "PersistentVolume", "persistentvolumes", False, ("status",), ("pv",), True),
    Kind("coordination.k8s.io", "v1", "Lease", "leases", True, (), (), True),
    Kind("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration",
         "mutatingwebhookconfigurations", False, (), (), True),
    Kind("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration",
         "validatingwebhookconfigurations", False, (), (), True),
    Kind("batch", "v1", "Job", "jobs", True, ("status",), (), True),
    Kind("apps", "v1", "StatefulSet", "statefulsets", True, ("status",), ("sts",), True),
    Kind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, ("status",), ("pdb",), True),
    Kind("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, (), ("pc",), True),
    Kind("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", False, (), (), True),
    Kind("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", False, (), (), True),
    Kind("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", True, ("status",), (), True),
    Kind("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", True, (), (), True),
    Kind("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs", True, ("status",)),
    Kind("kubeflow.org", "v2beta1", "MPIJob", "mpijobs", True, ("status",)),
    Kind("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", True, ("status",)),
    Kind("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs", True, ("status",)),
    Kind("trainer.kubeflow.org", "v1alpha1", "TrainingRuntime", "trainingruntimes", True),
    Kind("trainer.kubeflow.org", "v1alpha1", "ClusterTrainingRuntime", "clustertrainingruntimes", False),
    Kind("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets", True, ("status",), ("lws",)),
    Kind("ray.io", "v1", "RayCluster", "rayclusters", True, ("status",)),
    Kind("ray.io", "v1", "RayJob", "rayjobs", True, ("status",)),
    Kind("gangkeeper.io", "v1alpha1", "Gang", "gangs", True, ("status",), ("gang",)),
    Kind("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups", True, ("status",), ("pg",)),
    Kind("autoscaling.x-k8s.io", "v1", "ProvisioningRequest", "provisioningrequests", True, ("status",),
         ("provreq", "provreqs")),
]
NATIVE_POD_GROUP = Kind("scheduling.k8s.io", "v1beta1", "PodGroup", "podgroups", True, ("status",), (), True)


class Registry:
    """Look kinds up by path (group, version, plural) or, in process, by plural alone.

    Two groups serve `podgroups` when the native API is switched on; in-process callers then name
    the native one `podgroups.scheduling.k8s.io` and the plain plural keeps meaning the
    scheduler-plugins one, which every cluster in the emulation serves.
    """

    def __init__(self, native_pod_groups: bool = False, unserved: frozenset[str] = frozenset()):
        """`unserved` names resources (`pytorchjobs.kubeflow.org`) left out, as when a CRD is not installed."""
        self._known = list(_CORE) + ([NATIVE_POD_GROUP] if native_pod_groups else [])
        self._index(frozenset(unserved))

    def _index(self, unserved: frozenset[str]) -> None:
        """The lookups for the kinds served: each built whole, then put in place, for readers on other threads."""
        self.unserved = unserved
        kinds = [k for k in self._known if k.qualified_resource not in unserved]
        by_name: dict[str, Kind] = {}
        for k in kinds:
            by_name.setdefault(k.plural, k)
            by_name[k.qualified_resource] = k
        self.kinds, self._by_path, self._by_name = kinds, {(k.group, k.version, k.plural): k for k in kinds}, by_name

    def serve(self, resource: str, served: bool = True) -> None:
        """Serve `resource` (`pytorchjobs.kubeflow.org`) from now on, or stop serving it: a CRD
        installed late, or one whose handlers are not ready (an API server starting again) and
        answer 404 meanwhile. What is stored of it stays stored."""
        if not any(k.qualified_resource == resource for k in self._known):
            raise ValueError(f"serve {resource!r}: the emulation knows no such resource; "
                             f"give one of {', '.join(sorted(k.qualified_resource for k in self._known))}")
        self._index(self.unserved - {resource} if served else self.unserved | {resource})

    def by_path(self, group: str, version: str, plural: str) -> Kind | None:
        return self._by_path.get((group, version, plural))

    def by_name(self, resource: str) -> Kind | None:
        """`pods`, `jobs`, `jobs.batch`, `podgroups.scheduling.k8s.io`."""
        return self._by_name.get(resource)

    def by_kind(self, api_version: str, kind: str) -> Kind | None:
        return next((k for k in self.kinds if k.api_version == api_version and k.kind == kind), None)

    def groups(self) -> dict[str, list[Kind]]:
        """Non-core groups in registration order, each with its kinds."""
        out: dict[str, list[Kind]] = {}
        for k in self.kinds:
            if k.group:
                out.setdefault(k.group, []).append(k)
        return out
