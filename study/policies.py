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
  (deploy/base/webhook-configurations.yaml). The controller is the real decision and
  execution: `controller.index.ClusterIndex` fed with the informers' own transforms
  (`controller.groups.pod_facts`, `workload_from_api`, `controller.model.node_from_api`),
  `controller.reconciler.reconcile` on it, and `controller.actions.Executor` writing through
  `study.adapter.InProcessKube`, with the loop timing of `controller.runner.Controller`.
  Scaffolding here: the Flask test client in place of gunicorn and TLS, caches fed from the
  cluster's watch events in place of HTTP list/watch informers, and a loop on the virtual clock
  that copies `controller.runner.Controller.run` (see `GangkeeperController`). Leader election,
  metrics and the HTTP adapter `controller.kube.Kube` are not exercised.
"""

import base64
import inspect
import math
from collections import deque
from collections.abc import Callable
from datetime import datetime, timezone

import orjson

from gangkeeper import names
from gangkeeper.audit import AuditLog
from gangkeeper.controller.actions import Executor
from gangkeeper.controller.groups import pod_facts, workload_from_api
from gangkeeper.controller.index import Change, ClusterIndex
from gangkeeper.controller.informer import object_key
from gangkeeper.controller.model import node_from_api
from gangkeeper.controller.reconciler import Memory, Settings, reconcile
from gangkeeper.controller.runner import Controller
from gangkeeper.quantity import parse_quantity
from gangkeeper.resources import accelerators, pod_requests
from sim.api import APIError, ClusterAPI, User, WatchEvent
from sim.apiserver import APIServer
from sim.deployed import install_webhook_configurations
from sim.names import NODES, PODS, PYTORCHJOBS
from study.adapter import InProcessKube

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


def install_webhook(api: APIServer, handler: WebhookInProcess) -> None:
    """The product's webhook configurations, served by `handler` (the API server must map
    `WEBHOOK_SERVICE` to it; see `gangkeeper_api`)."""
    install_webhook_configurations(api)


def gangkeeper_api(clock: Callable[[], float]) -> tuple[APIServer, WebhookInProcess]:
    webhook = WebhookInProcess()
    api = APIServer(clock=clock, webhook_services={WEBHOOK_SERVICE: webhook})
    install_webhook(api, webhook)
    return api, webhook


# The workload kinds the controller watches, as the emulation names them; the controller names
# them `plural.group` (`controller.kube.Resource.name`), which is the emulation's qualified name.
WORKLOAD_PLURALS = ("pytorchjobs", "jobsets", "jobs", "gangs", "podgroups")
# The loop's timing is the product's own: the defaults of `controller.runner.Controller`.
_RUNNER_DEFAULTS = {name: parameter.default
                    for name, parameter in inspect.signature(Controller.__init__).parameters.items()
                    if parameter.default is not inspect.Parameter.empty}


class GangkeeperController:
    """`controller.runner.Controller`'s loop on the virtual clock (study scaffolding around the
    product's decision and execution code).

    Like `Controller.run`: watch events become changes `(resource, key, value or None)` as the
    informers report them (`on_object`), each change wakes the loop, and a turn `debounce`
    seconds after the first change applies them to a `controller.index.ClusterIndex`, decides with
    `reconcile(..., index=...)` and executes with the `Executor`; the pods the API answers with
    go into the index at once (`written`), and a turn whose pod writes succeeded is followed by
    another at once. A turn runs at least every `resync` seconds, and every `consistency`
    seconds the index is rebuilt from the caches and compared (`ClusterIndex.rebuilt_from`).
    This process always leads.
    """

    def __init__(self, api: APIServer, *, clock: Callable[[], float], settings: Settings | None = None,
                 debounce: float = _RUNNER_DEFAULTS["debounce_seconds"],
                 resync: float = _RUNNER_DEFAULTS["resync_seconds"],
                 consistency: float = _RUNNER_DEFAULTS["consistency_seconds"]):
        self.settings = settings or Settings()
        self.debounce, self.resync, self.consistency = debounce, resync, consistency
        self.kube = InProcessKube(api)
        self.audit = _NoAudit()
        self.executor = Executor(self.kube, AuditLog("gangkeeper-controller", self.audit), written=self._assume,
                                 clock=lambda: datetime.fromtimestamp(clock(), timezone.utc))
        self.workload_names = {plural: api.kind(plural).qualified_resource for plural in WORKLOAD_PLURALS}
        self.resources = (PODS, NODES, *self.workload_names)
        self.caches: dict[str, dict[str, object]] = {name: {} for name in (PODS, NODES, *self.workload_names.values())}
        self.index = ClusterIndex(self.settings.accelerator_patterns)
        self.changes: deque[Change] = deque()
        self.memory = Memory()
        self.leading = False
        self.woken_at: float | None = None
        self.wrote = False
        self.pod_writes = 0
        self.last_turn = -math.inf
        self.next_check: float | None = None
        self.passes = self.failed_actions = self.inconsistencies = 0

    # the informers: a cache of transformed objects, every change reported
    def observe(self, event: WatchEvent, now: float) -> None:
        obj = event.object
        resource = self.workload_names.get(event.resource, event.resource)
        key = object_key(obj)
        value = None
        if event.type != "DELETED":
            if resource == PODS:
                value = pod_facts(obj)
            elif resource == NODES:
                value = node_from_api(obj)
            else:
                value = workload_from_api(resource, obj)
        cache = self.caches[resource]
        if value is None and cache.pop(key, None) is None:
            return
        if value is not None:
            cache[key] = value
        self.changes.append((resource, key, value))
        if self.woken_at is None:
            self.woken_at = now

    def _assume(self, pod: dict) -> None:
        facts = pod_facts(pod)
        if facts is not None:
            self.changes.append((PODS, object_key(pod), facts))
            self.pod_writes += 1

    def next_due(self) -> float | None:
        if self.wrote:
            return self.last_turn
        resync = self.last_turn + self.resync
        return resync if self.woken_at is None else min(resync, self.woken_at + self.debounce)

    def step(self, now: float) -> bool:
        if now < self.next_due():
            return False
        self.woken_at, self.wrote, self.last_turn = None, False, now
        self.index.apply(self._drain())
        if not self.leading:
            self.leading, self.memory, self.next_check = True, Memory(), now + self.consistency
            self.index.touch_all()
        if now >= self.next_check:
            self._check_consistency(now)
        requests, pod_writes = self.kube.requests, self.pod_writes
        outcome = reconcile((), {}, (), self.memory, now, self.settings, index=self.index)
        self.memory = outcome.memory
        self.failed_actions += self.executor.execute(outcome.actions)
        self.wrote = self.pod_writes > pod_writes
        self.passes += 1
        return self.kube.requests > requests

    def _drain(self) -> list[Change]:
        batch = list(self.changes)
        self.changes.clear()
        return batch

    def _check_consistency(self, now: float) -> None:
        self.next_check = now + self.consistency
        workloads = [w for name in self.workload_names.values() for w in self.caches[name].values()]
        fresh, differences = self.index.rebuilt_from(self.caches[PODS].values(), workloads,
                                                     self.caches[NODES].values(), self._drain())
        self.inconsistencies += bool(differences)
        self.index = fresh


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
    api = APIServer(clock=clock, webhook_services={QUOTA_SERVICE: quota_gate_webhook})
    api.create("mutatingwebhookconfigurations", quota_configuration())
    return api


QUOTA_USER = User("system:serviceaccount:study:quota-gate")


class QuotaGate:
    """Releases whole PyTorchJobs in submission order while their GPUs fit under the quota.

    quota = Σ GPUs the nodes have; usage = Σ GPUs of released workloads that have not finished.
    BestEffortFIFO: a workload over the quota is skipped and later ones may still go. The queue
    is looked at again only when it can have changed: a workload got all its pods, one finished,
    or a node changed.
    """

    resources = (PODS, NODES, PYTORCHJOBS)

    def __init__(self, api: ClusterAPI):
        self.api = api
        self.node_gpus: dict[str, float] = {}
        self.jobs: dict[str, dict] = {}  # uid → job, in submission order
        self.pods: dict[str, dict[str, dict]] = {}  # job uid → pod name → pod
        self.ready: dict[str, float] = {}  # uid → GPUs, for unreleased jobs whose pods all exist, gated
        self.released: dict[str, float] = {}  # job uid → GPUs it takes from the quota
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
                self.dirty |= self.released.pop(uid, None) is not None  # its GPUs go back to the quota
            else:
                self.jobs[uid] = obj
                self._check_ready(uid)
        else:
            owner = next((r["uid"] for r in obj["metadata"].get("ownerReferences") or () if r.get("controller")), None)
            if owner is None:
                return
            pods = self.pods.setdefault(owner, {})
            if deleted:
                pods.pop(obj["metadata"]["name"], None)
            else:
                pods[obj["metadata"]["name"]] = obj
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
        free = sum(self.node_gpus.values()) - sum(self.released.values())
        wrote = False
        for uid in [uid for uid in self.jobs if uid in self.ready]:  # submission order
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

