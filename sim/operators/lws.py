"""The LeaderWorkerSet controllers (leaderworkerset.x-k8s.io/v1) and LWS's webhooks, as far as pods go.

As kubernetes-sigs/lws does it (pkg/controllers/leaderworkerset_controller.go, pod_controller.go,
pkg/webhooks/pod_webhook.go and leaderworkerset_webhook.go):
- the LWS controller keeps the leader StatefulSet `{lws}`, owned by the LWS: `replicas` leaders,
  Parallel, from `leaderTemplate` (else `workerTemplate`) labelled with the LWS's name, worker
  index `0` and template revision, annotated with the group size. It writes the status:
  `replicas` (the leader StatefulSet's), `readyReplicas` (groups whose leader is Running and Ready
  and whose worker StatefulSet is ready), `updatedReplicas`, `hpaPodSelector`,
  `observedGeneration`, and the condition `Available` (every group ready, reason AllGroupsReady)
  or `Progressing` (GroupsProgressing), the other one turned False;
- its pod controller gives each leader pod a worker StatefulSet `{leader}`, owned by the leader
  pod: `size - 1` workers, ordinals from 1, Parallel, from `workerTemplate` labelled with the
  leader's LWS name, group index, group key and revision, annotated with the size and the
  leader's name. Under `startupPolicy: LeaderReady` only once the leader is Ready; never for a
  leader being deleted or a group of one. Under `restartPolicy: RecreateGroupOnPodRestart` (the
  default) a pod of the group being deleted gets the group's leader deleted, so that the whole
  group is made again (`RecreateGroupAfterStart`: not while a pod of the group is pending);
- the pod webhook (`mpod.kb.io`: CREATE of pods labelled with an LWS name) labels a leader with its
  group index (the ordinal ending its name) and group key (SHA-1 of `namespace/name`) when it has
  none, a worker with its worker index, and puts LWS_LEADER_ADDRESS, LWS_GROUP_SIZE and
  LWS_WORKER_INDEX first in each container's env; the LWS webhook (`mleaderworkerset.kb.io`)
  defaults the restart policy, the rollout strategy and the network config.
`install` registers both webhooks, served in process, under LWS's own configuration name: the API
server calls configurations by name, so LWS's comes after gangkeeper's unless a test installs it
under a name that sorts first.

The revision is a hash of the `leaderWorkerTemplate` and `networkConfig`, as LWS's is, kept in no
ControllerRevision. Not modelled: rolling updates (a changed template is not rolled out: only
`replicas` is passed on), `maxSurge` and partitions, the headless Services, exclusive placement,
subgroups, TPU env, volume claim templates; the leader is deleted in the background, not in the
foreground (its worker StatefulSet goes once it is gone); containers never restart here, so only a
pod being deleted recreates a group.
"""

import base64
import copy
import hashlib
import json
import re

import jsonpatch

from gangkeeper.names import (
    LWS_GROUP_INDEX_LABEL,
    LWS_KIND,
    LWS_LEADER_READY,
    LWS_LEADER_WORKER_INDEX,
    LWS_NAME_LABEL,
    LWS_REVISION_LABEL,
    LWS_WORKER_INDEX_LABEL,
)
from sim.api import APIError, ClusterAPI, WatchEvent, service_account
from sim.clock import rfc3339
from sim.names import (
    LEADERWORKERSETS,
    LWS_API_VERSION,
    LWS_GROUP_KEY_LABEL,
    LWS_GROUP_SIZE_ENV,
    LWS_LEADER_ADDRESS_ENV,
    LWS_LEADER_NAME_ANNOTATION,
    LWS_REPLICAS_ANNOTATION,
    LWS_SIZE_ANNOTATION,
    LWS_SUBDOMAIN_POLICY_ANNOTATION,
    LWS_WORKER_INDEX_ENV,
    PODS,
    STATEFULSET_API_VERSION,
    STATEFULSETS,
)
from sim.operators import Operator, Plan, owner_reference, status_if_changed, template_metadata
from sim.operators.statefulset import PARALLEL, phase, running_and_ready, terminating

LWS_CONTROLLER = service_account("lws-system", "lws-controller-manager")
WEBHOOK_CONFIGURATION = "lws-mutating-webhook-configuration"
WEBHOOK_SERVICE = "lws-webhook-service.lws-system.svc:443"
POD_WEBHOOK_PATH = "/mutate--v1-pod"
LWS_WEBHOOK_PATH = "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset"
RECREATING_POLICIES = ("RecreateGroupOnPodRestart", "RecreateGroupAfterStart")
UNIQUE_PER_REPLICA = "UniquePerReplica"
AVAILABLE = ("Available", "AllGroupsReady", "All replicas are ready")
PROGRESSING = ("Progressing", "GroupsProgressing", "Replicas are progressing")
UPDATING = ("UpdateInProgress", "GroupsUpdating", "Rolling Upgrade is in progress")
_ORDINAL = re.compile(r"^(.*)-([0-9]+)$")  # LWS's statefulsetutils.GetParentNameAndOrdinal


# --- what the LWS's pods carry ----------------------------------------------------------------

def spec_of(lws: dict) -> dict:
    return lws.get("spec") or {}


def size_of(lws: dict) -> int:
    return int((spec_of(lws).get("leaderWorkerTemplate") or {}).get("size", 1))


def template_revision(lws: dict) -> str:
    """A hash of what LWS's revisions record (leaderWorkerTemplate, networkConfig), FNV-32 in the
    safe alphabet: the `template-revision-hash` every pod of the LWS carries."""
    spec = spec_of(lws)
    recorded = {"leaderWorkerTemplate": spec.get("leaderWorkerTemplate"),
                "networkConfig": spec.get("networkConfig") or {"subdomainPolicy": "Shared"}}
    digest = 0x811C9DC5
    for byte in json.dumps(recorded, sort_keys=True).encode():
        digest = ((digest ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join("bcdfghjklmnpqrstvwxz2456789"[ord(c) % 27] for c in str(digest))


def labels_of(obj: dict) -> dict:
    return obj["metadata"].get("labels") or {}


def is_leader(pod: dict) -> bool:
    return labels_of(pod).get(LWS_WORKER_INDEX_LABEL) == LWS_LEADER_WORKER_INDEX


def ordinal_of(name: str) -> tuple[str, int | None]:
    """(parent, ordinal) of a StatefulSet pod's name; (``, None) when it ends in no ordinal."""
    found = _ORDINAL.match(name)
    return (found.group(1), int(found.group(2))) if found else ("", None)


def group_key(namespace: str, leader: str) -> str:
    return hashlib.sha1(f"{namespace}/{leader}".encode()).hexdigest()


# --- the StatefulSets -------------------------------------------------------------------------

def leader_statefulset(lws: dict) -> dict:
    """`{lws}`: one leader per group, all at once (constructLeaderStatefulSetApplyConfiguration)."""
    metadata, spec = lws["metadata"], spec_of(lws)
    templates = spec.get("leaderWorkerTemplate") or {}
    template = copy.deepcopy(templates.get("leaderTemplate") or templates.get("workerTemplate") or {})
    labels, annotations = template_metadata(template)
    revision = template_revision(lws)
    template["metadata"] = {**(template.get("metadata") or {}),
                            "labels": {**labels, LWS_WORKER_INDEX_LABEL: LWS_LEADER_WORKER_INDEX,
                                       LWS_NAME_LABEL: metadata["name"], LWS_REVISION_LABEL: revision},
                            "annotations": {**annotations, LWS_SIZE_ANNOTATION: str(size_of(lws))}}
    replicas = int(spec.get("replicas", 1))
    return {"apiVersion": STATEFULSET_API_VERSION, "kind": "StatefulSet",
            "metadata": {"name": metadata["name"], "namespace": metadata["namespace"],
                         "labels": {**(metadata.get("labels") or {}), LWS_NAME_LABEL: metadata["name"],
                                    LWS_REVISION_LABEL: revision},
                         "annotations": {**(metadata.get("annotations") or {}), LWS_REPLICAS_ANNOTATION: str(replicas)},
                         "ownerReferences": [owner_reference(lws, LWS_API_VERSION)]},
            "spec": {"serviceName": metadata["name"], "replicas": replicas, "podManagementPolicy": PARALLEL,
                     "template": template,
                     "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "partition": 0}},
                     "selector": {"matchLabels": {LWS_NAME_LABEL: metadata["name"],
                                                  LWS_WORKER_INDEX_LABEL: LWS_LEADER_WORKER_INDEX}}}}


def worker_statefulset(leader: dict, lws: dict) -> dict:
    """`{leader}`: the leader's `size - 1` workers, ordinals from 1, all at once
    (constructWorkerStatefulSetApplyConfiguration)."""
    spec = spec_of(lws)
    leader_labels = labels_of(leader)
    ours = {LWS_GROUP_INDEX_LABEL: leader_labels.get(LWS_GROUP_INDEX_LABEL, ""), LWS_NAME_LABEL: lws["metadata"]["name"],
            LWS_GROUP_KEY_LABEL: leader_labels.get(LWS_GROUP_KEY_LABEL, "")}
    template = copy.deepcopy((spec.get("leaderWorkerTemplate") or {}).get("workerTemplate") or {})
    labels, annotations = template_metadata(template)
    revision = {LWS_REVISION_LABEL: leader_labels.get(LWS_REVISION_LABEL, "")}
    template["metadata"] = {**(template.get("metadata") or {}), "labels": {**labels, **ours, **revision},
                            "annotations": {**annotations, LWS_SIZE_ANNOTATION: str(size_of(lws)),
                                            LWS_LEADER_NAME_ANNOTATION: leader["metadata"]["name"]}}
    unique = (spec.get("networkConfig") or {}).get("subdomainPolicy") == UNIQUE_PER_REPLICA
    metadata = {"name": leader["metadata"]["name"], "namespace": leader["metadata"]["namespace"],
                "labels": {**(lws["metadata"].get("labels") or {}), **ours, **revision},
                "ownerReferences": [owner_reference(leader, "v1")]}
    if lws["metadata"].get("annotations"):
        metadata["annotations"] = dict(lws["metadata"]["annotations"])
    return {"apiVersion": STATEFULSET_API_VERSION, "kind": "StatefulSet", "metadata": metadata,
            "spec": {"serviceName": leader["metadata"]["name"] if unique else lws["metadata"]["name"],
                     "replicas": size_of(lws) - 1, "podManagementPolicy": PARALLEL, "template": template,
                     "ordinals": {"start": 1}, "selector": {"matchLabels": ours}}}


def statefulset_ready(statefulset: dict) -> bool:
    """LWS's StatefulsetReady: every replica available, at one revision."""
    status = statefulset.get("status") or {}
    return (int(statefulset["spec"].get("replicas", 1)) == status.get("availableReplicas", 0)
            and status.get("currentRevision") == status.get("updateRevision"))


# --- the LWS's status -------------------------------------------------------------------------

def lws_status(lws: dict, leader_set: dict | None, leaders: list[dict], worker_sets: dict[str, dict],
               now: float) -> dict:
    """The status LWS's updateStatus writes, for groups all at the LWS's one revision."""
    name, replicas = lws["metadata"]["name"], int(spec_of(lws).get("replicas", 1))
    revision, alone = template_revision(lws), size_of(lws) == 1
    ready = updated = ready_wanted = updated_wanted = updated_and_ready = 0
    for leader in leaders:
        workers = worker_sets.get(leader["metadata"]["name"])
        if not alone and workers is None:
            continue
        index = int(labels_of(leader).get(LWS_GROUP_INDEX_LABEL, -1))
        is_ready = (alone or statefulset_ready(workers)) and running_and_ready(leader)
        is_updated = (labels_of(leader).get(LWS_REVISION_LABEL) == revision
                      and (alone or labels_of(workers).get(LWS_REVISION_LABEL) == revision))
        ready, updated = ready + is_ready, updated + is_updated
        if 0 <= index < replicas:
            ready_wanted, updated_wanted = ready_wanted + is_ready, updated_wanted + is_updated
            updated_and_ready += is_ready and is_updated
    current = sum(0 <= int(labels_of(p).get(LWS_GROUP_INDEX_LABEL, -1)) < replicas
                  for p in leaders if alone or p["metadata"]["name"] in worker_sets)
    if updated_wanted < current:
        wanted = [UPDATING, PROGRESSING]
    elif ready_wanted == replicas and updated_and_ready == current:
        wanted = [AVAILABLE]
    else:
        wanted = [PROGRESSING]
    previous = lws.get("status") or {}
    return {"replicas": ((leader_set or {}).get("status") or {}).get("replicas", 0),
            "readyReplicas": ready, "updatedReplicas": updated,
            "hpaPodSelector": f"{LWS_NAME_LABEL}={name},{LWS_WORKER_INDEX_LABEL}={LWS_LEADER_WORKER_INDEX}",
            "observedGeneration": lws["metadata"].get("generation", 1),
            "conditions": set_conditions(previous.get("conditions") or [], wanted,
                                         lws["metadata"].get("generation", 1), rfc3339(now))}


def set_conditions(conditions: list[dict], wanted: list[tuple[str, str, str]], generation: int,
                   moment: str) -> list[dict]:
    """LWS's setConditions: each wanted condition True; Available and Progressing (or
    UpdateInProgress) exclude each other, so the one not wanted turns False; a condition is only
    ever added True; every condition carries the LWS's generation."""
    out = [dict(c) for c in conditions]
    exclusive = {frozenset({"Available", "Progressing"}), frozenset({"Available", "UpdateInProgress"})}
    for kind, reason, message in wanted:
        new = {"type": kind, "status": "True", "lastTransitionTime": moment, "observedGeneration": generation,
               "reason": reason, "message": message}
        found = False
        for i, current in enumerate(out):
            if current["type"] == kind:
                found = True
                if current["status"] != "True" or current.get("observedGeneration") != generation:
                    out[i] = new
            elif frozenset({current["type"], kind}) in exclusive and current["status"] == "True":
                out[i] = dict(current, status="False", lastTransitionTime=moment, observedGeneration=generation)
        if not found:
            out.append(new)
    return [dict(c, observedGeneration=generation) for c in out]


# --- the webhooks -----------------------------------------------------------------------------

def defaulted_pod(pod: dict, namespace: str) -> dict:
    """The pod as LWS's pod webhook leaves it (PodWebhook.Default); ValueError when it refuses it."""
    pod = copy.deepcopy(pod)
    metadata = pod["metadata"]
    labels, annotations = metadata.setdefault("labels", {}), metadata.get("annotations") or {}
    if LWS_SIZE_ANNOTATION not in annotations:
        raise ValueError(f"size annotation is unexpectedly missing for pod {metadata.get('name', '')}")
    _, ordinal = ordinal_of(metadata.get("name", ""))
    if ordinal is None:
        raise ValueError(f"parsing pod ordinal for pod {metadata.get('name', '')}")
    if is_leader(pod):
        labels.setdefault(LWS_GROUP_INDEX_LABEL, str(ordinal))
        if annotations.get(LWS_SUBDOMAIN_POLICY_ANNOTATION) == UNIQUE_PER_REPLICA:
            pod["spec"]["subdomain"] = metadata["name"]
        labels.setdefault(LWS_GROUP_KEY_LABEL, group_key(namespace, metadata["name"]))
    else:
        labels[LWS_WORKER_INDEX_LABEL] = str(ordinal)
    address = f"{labels[LWS_NAME_LABEL]}-{labels.get(LWS_GROUP_INDEX_LABEL, '')}.{pod['spec'].get('subdomain', '')}." \
              f"{namespace}"
    first = [{"name": LWS_LEADER_ADDRESS_ENV, "value": address},
             {"name": LWS_GROUP_SIZE_ENV, "value": annotations[LWS_SIZE_ANNOTATION]},
             {"name": LWS_WORKER_INDEX_ENV, "value": labels[LWS_WORKER_INDEX_LABEL]}]
    for container in (pod["spec"].get("initContainers") or []) + (pod["spec"].get("containers") or []):
        ours = {env["name"] for env in first}
        container["env"] = first + [env for env in container.get("env") or () if env.get("name") not in ours]
    return pod


def defaulted_lws(lws: dict) -> dict:
    """The LWS as LWS's own webhook defaults it (LeaderWorkerSetWebhook.Default)."""
    lws = copy.deepcopy(lws)
    spec = lws.setdefault("spec", {})
    template = spec.setdefault("leaderWorkerTemplate", {})
    template["restartPolicy"] = {"": "RecreateGroupOnPodRestart", "Default": "None"}.get(
        template.get("restartPolicy") or "", template.get("restartPolicy"))
    strategy = spec.setdefault("rolloutStrategy", {})
    strategy["type"] = strategy.get("type") or "RollingUpdate"
    if strategy["type"] == "RollingUpdate" and not strategy.get("rollingUpdateConfiguration"):
        strategy["rollingUpdateConfiguration"] = {"maxUnavailable": 1, "maxSurge": 0, "partition": 0}
    network = spec.setdefault("networkConfig", {})
    network.setdefault("subdomainPolicy", "Shared")
    return lws


def webhook(path: str, review: dict) -> dict:
    """LWS's webhook server, in process (`sim.admission.InProcessWebhook`): a JSON Patch from the
    object to its defaulted form, or a denial (403) saying why, as controller-runtime answers."""
    request = review["request"]
    obj = request["object"]
    try:
        defaulted = (defaulted_pod(obj, request.get("namespace", "")) if path == POD_WEBHOOK_PATH
                     else defaulted_lws(obj))
        response = {"uid": request["uid"], "allowed": True}
        patch = jsonpatch.make_patch(obj, defaulted).patch
        if patch:
            response.update(patchType="JSONPatch", patch=base64.b64encode(json.dumps(patch).encode()).decode())
    except ValueError as refused:
        response = {"uid": request["uid"], "allowed": False, "status": {"code": 403, "message": str(refused)}}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


def webhook_configuration(name: str = WEBHOOK_CONFIGURATION) -> dict:
    """LWS's MutatingWebhookConfiguration, as its Helm chart installs it."""
    service, _, _ = WEBHOOK_SERVICE.partition(".")
    namespace = WEBHOOK_SERVICE.split(".")[1]

    def hook(hook_name: str, path: str, group: str, resource: str, operations: list[str]) -> dict:
        return {"name": hook_name, "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
                "clientConfig": {"service": {"name": service, "namespace": namespace, "path": path}},
                "rules": [{"apiGroups": [group], "apiVersions": ["v1"], "operations": operations,
                           "resources": [resource]}]}

    pods = hook("mpod.kb.io", POD_WEBHOOK_PATH, "", "pods", ["CREATE"])
    pods["objectSelector"] = {"matchExpressions": [{"key": LWS_NAME_LABEL, "operator": "Exists"}]}
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": name},
            "webhooks": [hook("mleaderworkerset.kb.io", LWS_WEBHOOK_PATH, "leaderworkerset.x-k8s.io",
                              LEADERWORKERSETS, ["CREATE", "UPDATE"]), pods]}


def install(api, configuration: str = WEBHOOK_CONFIGURATION) -> None:
    """LWS's webhooks on an emulated API server (`sim.apiserver.APIServer`), served in process,
    under `configuration` (its name orders it among the others); nothing when they are there."""
    api.admission.services[WEBHOOK_SERVICE] = webhook
    service = WEBHOOK_SERVICE.split(".")[0]
    if not any(((hook.get("clientConfig") or {}).get("service") or {}).get("name") == service
               for existing in api.list("mutatingwebhookconfigurations") for hook in existing.get("webhooks") or ()):
        api.create("mutatingwebhookconfigurations", webhook_configuration(configuration))


# --- the controllers ----------------------------------------------------------------------------

def pod_ready(pod: dict) -> bool:
    """LWS's IsPodReady: the Ready condition is True."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


def controller_of(obj: dict) -> dict | None:
    return next((r for r in obj["metadata"].get("ownerReferences") or () if r.get("controller")), None)


class LeaderWorkerSetController:
    """Both LWS controllers as one component of the emulated cluster: the LWS controller (an
    `Operator` of LWSs and the leader StatefulSets they own) and the pod controller (an `Operator`
    of leader pods and the worker StatefulSets they own), with what they read besides: every pod
    of an LWS, every worker StatefulSet."""

    resources = (LEADERWORKERSETS, STATEFULSETS, PODS)

    def __init__(self, api: ClusterAPI, **options):
        self.api = api
        self.sets = Operator(api, workloads=LEADERWORKERSETS, kind=LWS_KIND, children=STATEFULSETS, user=LWS_CONTROLLER,
                             reconcile=self._reconcile_set, **options)
        self.leaders = Operator(api, workloads=PODS, kind="Pod", children=STATEFULSETS, user=LWS_CONTROLLER,
                                reconcile=self._reconcile_leader, **options)
        self.lws: dict[tuple[str, str], dict] = {}  # (namespace, name) → LWS
        self.pods: dict[tuple[str, str], dict[str, dict]] = {}  # (namespace, LWS) → pod name → pod
        self.worker_sets: dict[tuple[str, str], dict] = {}  # (namespace, name) → a StatefulSet a pod owns
        self.recreate: dict[str, dict] = {}  # leader uid → leader to delete, its group to be made again

    def observe(self, event: WatchEvent, now: float) -> None:
        metadata = event.object["metadata"]
        namespace, gone = metadata.get("namespace", ""), event.type == "DELETED"
        if event.resource == LEADERWORKERSETS:
            _put(self.lws, (namespace, metadata["name"]), None if gone else event.object)
            self.sets.observe(event, now)
            self._touch_leaders(namespace, metadata["name"])
        elif event.resource == STATEFULSETS:
            self._observe_statefulset(event, now)
        elif labels_of(event.object).get(LWS_NAME_LABEL):
            self._observe_pod(event, now)

    def _observe_statefulset(self, event: WatchEvent, now: float) -> None:
        statefulset, metadata = event.object, event.object["metadata"]
        key = (metadata.get("namespace", ""), metadata["name"])
        owner = controller_of(statefulset) or {}
        if owner.get("kind") == "Pod":
            current = self.worker_sets.get(key)
            if event.type != "DELETED":
                self.worker_sets[key] = statefulset
            elif current is not None and current["metadata"].get("uid") == metadata.get("uid"):
                del self.worker_sets[key]
                self._touch_leader(key[0], labels_of(statefulset).get(LWS_NAME_LABEL, ""), key[1])
        self.sets.observe(event, now)
        self.leaders.observe(event, now)
        self._touch_set(key[0], labels_of(statefulset).get(LWS_NAME_LABEL, ""))

    def _observe_pod(self, event: WatchEvent, now: float) -> None:
        pod, metadata = event.object, event.object["metadata"]
        namespace, lws = metadata.get("namespace", ""), metadata["labels"][LWS_NAME_LABEL]
        members = self.pods.setdefault((namespace, lws), {})
        _put(members, metadata["name"], None if event.type == "DELETED" else pod)
        if is_leader(pod):
            self.leaders.observe(event, now)
        self._touch_set(namespace, lws)
        if event.type == "MODIFIED" and terminating(pod):
            self._restart_group(pod)

    def _touch_set(self, namespace: str, lws: str) -> None:
        """The LWS's status depends on what changed: reconcile it."""
        found = self.lws.get((namespace, lws))
        if found is not None:
            self.sets.dirty[found["metadata"]["uid"]] = None

    def _touch_leader(self, namespace: str, lws: str, name: str) -> None:
        leader = self.pods.get((namespace, lws), {}).get(name)
        if leader is not None and leader["metadata"]["uid"] in self.leaders.workloads:
            self.leaders.dirty[leader["metadata"]["uid"]] = None

    def _touch_leaders(self, namespace: str, lws: str) -> None:
        for name, pod in list(self.pods.get((namespace, lws), {}).items()):
            if is_leader(pod):
                self._touch_leader(namespace, lws, name)

    def step(self, now: float) -> bool:
        wrote = self._delete_leaders_to_recreate()
        return self.sets.step(now) | self.leaders.step(now) | wrote

    def next_due(self) -> float | None:
        return min((due for due in (self.sets.next_due(), self.leaders.next_due()) if due is not None), default=None)

    # --- the LWS controller --------------------------------------------------------------------

    def _reconcile_set(self, lws: dict, children: dict[str, dict], now: float) -> Plan:
        namespace, name = lws["metadata"]["namespace"], lws["metadata"]["name"]
        leader_set, plan = children.get(name), Plan()
        replicas = int(spec_of(lws).get("replicas", 1))
        if leader_set is None:
            plan.create.append(leader_statefulset(lws))
        elif int(leader_set["spec"].get("replicas", 1)) != replicas:
            plan.patch.append((leader_set, {"metadata": {"annotations": {LWS_REPLICAS_ANNOTATION: str(replicas)}},
                                            "spec": {"replicas": replicas}}))
        pods = self.pods.get((namespace, name), {})
        leaders = [pod for pod in pods.values() if is_leader(pod)]
        workers = {key[1]: s for key, s in self.worker_sets.items()
                   if key[0] == namespace and labels_of(s).get(LWS_NAME_LABEL) == name}
        plan.status = status_if_changed(lws, lws_status(lws, leader_set, leaders, workers, now))
        return plan

    # --- the pod controller --------------------------------------------------------------------

    def _reconcile_leader(self, leader: dict, children: dict[str, dict], now: float) -> Plan:
        """A leader's worker StatefulSet, once it may have one (module docstring)."""
        metadata = leader["metadata"]
        lws = self.lws.get((metadata.get("namespace", ""), labels_of(leader).get(LWS_NAME_LABEL, "")))
        if lws is None or not is_leader(leader) or terminating(leader) or size_of(lws) == 1:
            return Plan()
        if spec_of(lws).get("startupPolicy") == LWS_LEADER_READY and not pod_ready(leader):
            return Plan()
        if metadata["name"] in children or (metadata.get("namespace", ""), metadata["name"]) in self.worker_sets:
            return Plan()
        return Plan(create=[worker_statefulset(leader, lws)])

    def _restart_group(self, pod: dict) -> None:
        """handleRestartPolicy: a pod of a group being deleted gets the group's leader deleted."""
        metadata = pod["metadata"]
        namespace, lws_name = metadata.get("namespace", ""), metadata["labels"][LWS_NAME_LABEL]
        lws = self.lws.get((namespace, lws_name))
        policy = (spec_of(lws or {}).get("leaderWorkerTemplate") or {}).get("restartPolicy")
        if lws is None or policy not in RECREATING_POLICIES or is_leader(pod):
            return
        if policy == "RecreateGroupAfterStart" and self._pending(namespace, lws, pod):
            return
        leader = self.pods.get((namespace, lws_name), {}).get(ordinal_of(metadata["name"])[0])
        if leader is None or terminating(leader) or not self._of_leader(pod, leader):
            return
        self.recreate[leader["metadata"]["uid"]] = leader

    def _of_leader(self, worker: dict, leader: dict) -> bool:
        """workerPodBelongsToLeader, and of the leader's revision: a stale group's pods going away
        must not take the new group's leader with them."""
        if labels_of(worker).get(LWS_REVISION_LABEL) != labels_of(leader).get(LWS_REVISION_LABEL):
            return False
        owner = controller_of(worker) or {}
        workers = self.worker_sets.get((worker["metadata"].get("namespace", ""), owner.get("name", "")))
        if workers is None or owner.get("kind") != "StatefulSet" or workers["metadata"].get("uid") != owner.get("uid"):
            return False
        owning = controller_of(workers) or {}
        return owning.get("kind") == "Pod" and owning.get("uid") == leader["metadata"].get("uid")

    def _pending(self, namespace: str, lws: dict, pod: dict) -> bool:
        """pendingPodsInGroup: the group lacks a pod, or one of them is Pending."""
        index = pod["metadata"]["labels"].get(LWS_GROUP_INDEX_LABEL)
        group = [p for p in self.pods.get((namespace, lws["metadata"]["name"]), {}).values()
                 if labels_of(p).get(LWS_GROUP_INDEX_LABEL) == index]
        return len(group) != size_of(lws) or any(phase(p) == "Pending" for p in group)

    def _delete_leaders_to_recreate(self) -> bool:
        wrote = False
        for uid, leader in list(self.recreate.items()):
            del self.recreate[uid]
            metadata = leader["metadata"]
            current = self.pods.get((metadata["namespace"], metadata["labels"][LWS_NAME_LABEL]), {}).get(metadata["name"])
            if current is None or current["metadata"]["uid"] != uid or terminating(current):
                continue
            try:
                self.api.delete(PODS, metadata["name"], namespace=metadata["namespace"], user=LWS_CONTROLLER)
                wrote = True
            except APIError as error:
                if error.code != 404:
                    raise
        return wrote


def _put(index: dict, key, value) -> None:
    if value is None:
        index.pop(key, None)
    else:
        index[key] = value


def lws_controller(api: ClusterAPI, **options) -> LeaderWorkerSetController:
    return LeaderWorkerSetController(api, **options)
