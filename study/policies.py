"""The three admission policies the study compares, as components of the emulated cluster.

- `stock`: nothing added; the emulated default kube-scheduler places pods one at a time.
- `quota`: a quota-only gate (study scaffolding). Pods of GPU workloads are gated at creation;
  a workload is released — every pod ungated at once, no node chosen — when its GPUs fit in
  the cluster's GPUs not already taken by released, unfinished workloads. This is admission by
  quota without topology: what Kueue-style quota admission does for whole workloads (BestEffortFIFO
  order; no `waitForPodsReady`, no preemption), and the stock scheduler then places the pods as
  it can. Free GPUs can be scattered over nodes that no pod of the workload fits on.
- `gangkeeper`: the product. Admission is the real webhook (`webhook.app.create_app`, its
  /mutate and /validate, hence `webhook.mutate` and `webhook.validate`), served in process to
  the emulated API server under the product's own webhook configurations
  (deploy/base/webhook-configurations.yaml). The controller is the product's own
  `controller.runner.Controller` — its loop (`turn`, `due`), index, reconciler and Executor —
  on the emulation's virtual clock (see `GangkeeperController`).
  Scaffolding here: the Flask test client in place of gunicorn and TLS, informers fed from the
  cluster's watch events in place of HTTP list/watch (`study.adapter.FedInformer`), and writes
  handed to the emulated API server in process (`study.adapter.InProcessKube`). Leader election,
  the loop's thread (`Controller.run`), settling memory (`Controller.settle_memory`) and the HTTP
  adapter `controller.reading.kube.Kube` are not exercised.
"""

import base64
from collections.abc import Callable

import orjson

from gangkeeper import names
from gangkeeper.audit import AuditLog
from gangkeeper.controller.deciding.settings import Settings
from gangkeeper.controller.metrics import Metrics
from gangkeeper.controller.reading.informer import Transform
from gangkeeper.controller.reading.kube import Resource
from gangkeeper.controller.runner import Clock, Controller
from gangkeeper.quantity import parse_quantity
from gangkeeper.resources import accelerators, pod_requests
from sim.api import APIError, ClusterAPI, User, WatchEvent
from sim.apiserver import APIServer
from sim.deployed import install_webhook_configurations
from sim.names import NODES, PODS, PYTORCHJOBS
from study.adapter import FedInformer, InProcessKube

WEBHOOK_SERVICE = f"{names.WEBHOOK_SERVICE}.{names.DEFAULT_NAMESPACE}.svc:443"
ENFORCED = {names.ENFORCE_LABEL: names.ENFORCE_VALUE}


class _NoAudit:
    """The study keeps no audit trail: counting the lines is enough."""

    def __init__(self):
        self.lines = 0

    def write_line(self, line: str) -> None:
        self.lines += 1


# --- gangkeeper ------------------------------------------------------------------------------

class WebhookInProcess:
    """The real webhook app answering AdmissionReviews through Flask's test client."""

    def __init__(self):
        from gangkeeper.webhook.app import create_app  # Flask is only needed when this policy runs

        self.client = create_app({"AUDIT_FILE": "/dev/null"}).test_client()
        self.requests = 0

    def __call__(self, path: str, review: dict) -> dict:
        self.requests += 1
        reply = self.client.post(path, data=orjson.dumps(review), content_type="application/json")
        if reply.status_code != 200:
            raise ValueError(f"webhook answered {reply.status_code}: {reply.get_data(as_text=True)[:200]}")
        return orjson.loads(reply.get_data())


# The emulated API server draws uids and generated pod names from this seed, so that a replay is
# the same every time: they break ties (between equally cheap victims, equally good nodes).
CLUSTER_SEED = 20261201


def install_webhook(api: APIServer, handler: WebhookInProcess) -> None:
    """The product's webhook configurations, served by `handler` (the API server must map
    `WEBHOOK_SERVICE` to it; see `gangkeeper_api`)."""
    install_webhook_configurations(api)


def gangkeeper_api(clock: Callable[[], float]) -> tuple[APIServer, WebhookInProcess]:
    webhook = WebhookInProcess()
    api = APIServer(clock=clock, webhook_services={WEBHOOK_SERVICE: webhook}, seed=CLUSTER_SEED)
    install_webhook(api, webhook)
    return api, webhook


class GangkeeperController:
    """The product's `controller.runner.Controller` as a component of the emulated cluster, on its
    virtual clock (both the loop's monotonic time and the cluster's time).

    Its informers are `study.adapter.FedInformer`s, handed the cluster's watch events (`observe`),
    and its writes go through `study.adapter.InProcessKube`. `step(now)` runs one turn of the
    controller's loop (`Controller.turn`) when the controller says one is due (`Controller.due`),
    which is also `next_due()`: debounce, resync, waking when a timeout falls due, the consistency
    rebuild and assuming the pods it wrote are the product's own. This process always leads. Its
    writes go out one after the other, in the pass's order, so that a seeded run commits them in the
    same order every time and repeats exactly.

    Settling memory (`Controller.settle_memory`, after each consistency rebuild) is left out: it
    decides nothing, and in a controller's own process it collects over the controller's caches,
    while here it would collect over everything the study's process holds (the emulation, the
    other replays, the test runner), every ten virtual minutes: most of a replay's time.
    """

    def __init__(self, api: APIServer, *, clock: Callable[[], float], settings: Settings | None = None):
        self.api = api
        self.kube = InProcessKube(api)
        self.audit = _NoAudit()
        self.informers: dict[str, FedInformer] = {}  # by the emulation's name of the resource
        self.controller = Controller(self.kube, settings or Settings(), AuditLog("gangkeeper-controller", self.audit),
                                     Metrics(), clock=Clock(monotonic=clock, wall=clock),
                                     make_informer=self._informer, concurrent_writes=1)
        self.controller.settle_memory = _leave_memory_alone
        self.resources = tuple(self.informers)
        self.passes = 0

    def _informer(self, resource: Resource, transform: Transform, **options) -> FedInformer:
        informer = FedInformer(self.api, resource, transform, **options)
        if informer.served:
            self.informers[informer.watched_as] = informer
        return informer

    def observe(self, event: WatchEvent, now: float) -> None:
        self.informers[event.resource].observe(event)

    def next_due(self) -> float:
        return self.controller.due()

    def step(self, now: float) -> bool:
        if now < self.controller.due():
            return False
        requests = self.kube.requests
        self.passes += self.controller.turn(lambda: True) is not None
        return self.kube.requests > requests

    @property
    def failed_actions(self) -> int:
        return self.controller.failed_actions

    @property
    def inconsistencies(self) -> int:
        """Consistency checks that found the incremental index off the caches (the product's metric)."""
        return int(self.controller.metrics.registry.get_sample_value("gangkeeper_index_inconsistencies_total"))

    @property
    def rollbacks(self) -> int:
        """Groups the controller rolled back (the product's metric)."""
        return int(self.controller.metrics.registry.get_sample_value("gangkeeper_rollbacks_total"))

    @property
    def preemptions(self) -> dict[str, int]:
        """Work the controller preempted, by how it took it (the product's metric: `suspended`,
        `deleted`, `evicted`)."""
        return {sample.labels["reason"]: int(sample.value)
                for metric in self.controller.metrics.preemptions.collect() for sample in metric.samples
                if sample.name.endswith("_total")}

    @property
    def capacity(self) -> dict:
        """What the controller asked an autoscaler for (the product's metrics): `asked` (requests or
        sets of placeholders made), `failed` by how the ask came to nothing."""
        metrics = self.controller.metrics
        asked = sum(int(sample.value) for metric in metrics.capacity_asked.collect() for sample in metric.samples
                    if sample.name.endswith("_total"))
        failed = {sample.labels["reason"]: int(sample.value)
                  for metric in metrics.capacity_failed.collect() for sample in metric.samples
                  if sample.name.endswith("_total")}
        return {"asked": asked, "failed": failed}


def _leave_memory_alone(collect: bool = True) -> None:
    """Python's collector runs as it would in any process (see `GangkeeperController`)."""


# --- quota-only gate (study scaffolding) ------------------------------------------------------

QUOTA_GATE = "study.gangkeeper.io/quota"
QUOTA_SERVICE = "quota-gate.study.svc:443"


def quota_gate_webhook(path: str, review: dict) -> dict:
    """Gate every GPU pod at creation (the namespace selector of `quota_configuration` picks the
    namespaces); the gate is the quota gate's, so that nothing but `QuotaGate` removes it."""
    request = review["request"]
    pod = request.get("object") or {}
    response: dict = {"uid": request["uid"], "allowed": True}
    if sum(accelerators(pod_requests(pod)).values()) > 0:
        gates = (pod.get("spec") or {}).get("schedulingGates")
        op = ({"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": QUOTA_GATE}} if gates
              else {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": QUOTA_GATE}]})
        response.update(patchType="JSONPatch", patch=base64.b64encode(orjson.dumps([op])).decode())
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def quota_configuration() -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "study-quota-gate"},
            "webhooks": [{"name": "gate.quota.study", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                          "failurePolicy": "Fail", "timeoutSeconds": 5,
                          "clientConfig": {"service": {"name": "quota-gate", "namespace": "study", "path": "/gate"}},
                          "namespaceSelector": {"matchLabels": dict(ENFORCED)},
                          "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                                     "resources": ["pods"], "scope": "Namespaced"}]}]}


def quota_api(clock: Callable[[], float]) -> APIServer:
    api = APIServer(clock=clock, webhook_services={QUOTA_SERVICE: quota_gate_webhook}, seed=CLUSTER_SEED)
    api.create("mutatingwebhookconfigurations", quota_configuration())
    return api


QUOTA_USER = User("system:serviceaccount:study:quota-gate")


class QuotaGate:
    """Releases whole PyTorchJobs, by priority then in submission order, while their GPUs fit
    under the quota.

    quota = Σ GPUs the nodes have; usage = Σ GPUs of released workloads that have not finished.
    A workload's priority is its pods' highest `spec.priority`, as Kueue takes a workload's
    priority from its pods' PriorityClass. BestEffortFIFO: a workload over the quota is skipped
    and later ones may still go. The queue is looked at again only when it can have changed: a
    workload got all its pods, one finished, or a node changed. A released workload stays
    admitted: a pod its operator recreates (one the kube-scheduler preempted) is ungated at once,
    as Kueue leaves the replacement pods of an admitted workload alone. The gate itself never
    preempts (Kueue's `withinClusterQueue: Never`).
    """

    resources = (PODS, NODES, PYTORCHJOBS)

    def __init__(self, api: ClusterAPI):
        self.api = api
        self.node_gpus: dict[str, float] = {}
        self.jobs: dict[str, dict] = {}  # uid → job, in submission order
        self.pods: dict[str, dict[str, dict]] = {}  # job uid → pod name → pod
        self.ready: dict[str, float] = {}  # uid → GPUs, for unreleased jobs whose pods all exist, gated
        self.priority: dict[str, int] = {}  # uid → the highest spec.priority of the job's pods
        self.released: dict[str, float] = {}  # job uid → GPUs it takes from the quota
        self.replacements: dict[str, dict] = {}  # pod name → a gated pod of a released job
        self.dirty = False
        self.releases = 0

    def observe(self, event: WatchEvent, now: float) -> None:
        obj, deleted = event.object, event.type == "DELETED"
        if event.resource == NODES:
            allocatable = (obj.get("status") or {}).get("allocatable") or {}
            gpus = float(sum(accelerators({k: parse_quantity(v) for k, v in allocatable.items()}).values()))
            self.node_gpus[obj["metadata"]["name"]] = 0.0 if deleted else gpus
            self.dirty = True
        elif event.resource == PYTORCHJOBS:
            uid = obj["metadata"]["uid"]
            if deleted or _succeeded(obj):
                self.jobs.pop(uid, None)
                self.pods.pop(uid, None)
                self.ready.pop(uid, None)
                self.priority.pop(uid, None)
                self.dirty |= self.released.pop(uid, None) is not None  # its GPUs go back to the quota
            else:
                self.jobs[uid] = obj
                self._check_ready(uid)
        else:
            owner = next((r["uid"] for r in obj["metadata"].get("ownerReferences") or () if r.get("controller")), None)
            if owner is None:
                return
            pods, name = self.pods.setdefault(owner, {}), obj["metadata"]["name"]
            if deleted:
                pods.pop(name, None)
                self.replacements.pop(name, None)
            else:
                pods[name] = obj
                self.priority[owner] = max(self.priority.get(owner, 0), (obj.get("spec") or {}).get("priority") or 0)
                if owner in self.released and _gate_index(obj) is not None:
                    self.replacements[name] = obj
                    self.dirty = True
            self._check_ready(owner)

    def _check_ready(self, uid: str) -> None:
        job, pods = self.jobs.get(uid), self.pods.get(uid, {})
        if job is None or uid in self.released or uid in self.ready:
            return
        if len(pods) >= _replicas(job) and all(_gate_index(p) is not None for p in pods.values()):
            self.ready[uid] = float(sum(sum(accelerators(pod_requests(p)).values()) for p in pods.values()))
            self.dirty = True

    def next_due(self) -> float | None:
        return None

    def step(self, now: float) -> bool:
        if not self.dirty:
            return False
        self.dirty = False
        wrote = False
        while self.replacements:
            wrote |= self._ungate(self.replacements.popitem()[1])
        free = sum(self.node_gpus.values()) - sum(self.released.values())
        in_order = sorted((uid for uid in self.jobs if uid in self.ready), key=lambda uid: -self.priority.get(uid, 0))
        for uid in in_order:  # by priority, then in submission order (the sort is stable)
            gpus = self.ready[uid]
            if gpus > free:
                continue
            free -= gpus
            del self.ready[uid]
            self.released[uid] = gpus
            self.releases += 1
            for pod in self.pods[uid].values():
                wrote |= self._ungate(pod)
        return wrote

    def _ungate(self, pod: dict) -> bool:
        index = _gate_index(pod)
        ops = [{"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": QUOTA_GATE},
               {"op": "remove", "path": f"/spec/schedulingGates/{index}"}]
        try:
            self.api.patch(PODS, pod["metadata"]["name"], ops, namespace=pod["metadata"]["namespace"],
                           patch_type="application/json-patch+json", user=QUOTA_USER)
        except APIError:
            return False
        return True


def _gate_index(pod: dict) -> int | None:
    gates = [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or ()]
    return gates.index(QUOTA_GATE) if QUOTA_GATE in gates else None


def _replicas(job: dict) -> int:
    return sum(int(spec.get("replicas", 1)) for spec in (job["spec"].get("pytorchReplicaSpecs") or {}).values())


def _succeeded(job: dict) -> bool:
    return any(c.get("type") == "Succeeded" and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or ())

