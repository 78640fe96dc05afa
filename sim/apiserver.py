"""The API server's request pipeline, in process: `APIServer` implements `sim.api.ClusterAPI`.

Every write takes the real server's path (and is written down first, as an audit log at level
Metadata would: `writes`): defaulting, mutating admission, identity and initial status, validation
(the pod rules, a PodDisruptionBudget's, a ProvisioningRequest's CRD rules), validating admission,
then one commit under the store lock with an optimistic-concurrency check. Webhooks are called
outside the lock.
The HTTP front end (`sim.server`) and the emulated scheduler, kubelet and operators all go through
this class. Besides the verbs it serves the pods/binding and pods/eviction subresources.
"""

from __future__ import annotations

import itertools
import random
import re
import time
from collections import deque
from typing import Callable, Iterable, NamedTuple

from sim import devices, disruption, podrules, priority, provisioningrequests
from sim.admission import Admission, Attributes, InProcessWebhook
from sim.api import ADMIN, SCHEDULER, APIError, User, WatchEvent, service_account
from sim.defaults import apply_defaults, prepare_for_create, rfc3339
from sim.disruption import PODDISRUPTIONBUDGETS
from sim.eviction import (
    EVICTION_KIND,
    budget_to_charge,
    can_ignore_budgets,
    charged,
    check_request,
    eviction,
    precondition_conflict,
    with_disruption_target,
)
from sim.kinds import Kind, Registry
from sim.names import PROVISIONING_REQUESTS, RESOURCE_SLICES
from sim.patching import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    apply_json_patch,
    apply_merge_patch,
    apply_strategic_merge_patch,
)
from sim.priority import PRIORITY_CLASSES
from sim.selectors import parse_fields, parse_labels
from sim.status import (
    FieldError,
    already_exists,
    bad_request,
    conflict,
    forbidden,
    invalid,
    not_found,
    page_not_found,
    stale,
    status,
    success,
    unsupported_media_type,
)
from sim.store import Store, as_watch_event, clone, key_of

GARBAGE_COLLECTOR = service_account("kube-system", "generic-garbage-collector")
NAMESPACE_CONTROLLER = service_account("kube-system", "namespace-controller")
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
_BINDING_KIND = {"group": "", "version": "v1", "kind": "Binding"}
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SUBDOMAIN_HELP = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                   "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                   "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")
_UPDATE_RETRIES = 8
# Kinds whose DELETE orphans dependents unless the client asks otherwise (kept for compatibility upstream).
_ORPHAN_BY_DEFAULT = {"jobs"}
WRITES_KEPT = 10_000


class Write(NamedTuple):
    """One write request, allowed or refused, as an audit log names it: the verb, the resource with
    its subresource (`pods/binding`), the object's name and who asked."""

    verb: str
    resource: str
    name: str
    user: str


class APIServer:
    """A Kubernetes API server in a process (see module docstring)."""

    def __init__(self, *, native_pod_groups: bool = False, unserved: Iterable[str] = (),
                 webhook_services: dict[str, str | InProcessWebhook] | None = None,
                 history_size: int = 200_000, clock: Callable[[], float] = time.time, seed: int | None = None):
        """`native_pod_groups` serves scheduling.k8s.io/v1beta1 PodGroups, as a 1.37 cluster with the gate on;
        `webhook_services` maps `NAME.NAMESPACE.svc[:PORT]` to `HOST:PORT`, or to a callable that serves
        the webhook in process (`sim.admission.InProcessWebhook`); `clock` gives epoch seconds.
        `unserved` leaves resources out (`pytorchjobs.kubeflow.org`), as when their CRD is not installed.
        `seed` draws uids and generated names from a seeded generator (a replay that is the same every time)."""
        self.kinds = Registry(native_pod_groups, frozenset(unserved))
        self.store = Store(history_size)
        self.admission = Admission(self._webhook_configurations, self._namespace_labels, webhook_services)
        self.clock = clock
        self.writes: deque[Write] = deque(maxlen=WRITES_KEPT)  # the latest, oldest first
        self._draw = random.Random(seed) if seed is not None else None
        for name in INITIAL_NAMESPACES:
            self.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        for definition in priority.SYSTEM_CLASSES:
            self.create(PRIORITY_CLASSES, priority.system_class(definition))

    # lookups -----------------------------------------------------------------------------------

    def kind(self, resource: str) -> Kind:
        kind = self.kinds.by_name(resource)
        if kind is None:
            raise page_not_found()
        return kind

    def resource_name(self, kind: Kind) -> str:
        """The name in-process callers use for `kind` (a plural, qualified only where two groups share it)."""
        return kind.plural if self.kinds.by_name(kind.plural) == kind else kind.qualified_resource

    def _now(self) -> str:
        return rfc3339(self.clock())

    def _written(self, verb: str, kind: Kind, subresource: str, name: str, user: User) -> None:
        self.writes.append(Write(verb, self.resource_name(kind) + (f"/{subresource}" if subresource else ""), name,
                                 user.username))

    def _namespace_labels(self, name: str) -> dict | None:
        namespace = self.store.get(self.kinds.by_name("namespaces"), ("", name))
        return None if namespace is None else namespace["metadata"].get("labels") or {}

    def _webhook_configurations(self, plural: str) -> list[dict]:
        return self.store.list(self.kinds.by_name(plural))

    def _scope(self, kind: Kind, namespace: str | None) -> str:
        if kind.namespaced and not namespace:
            raise bad_request("the server could not find the requested resource: namespace is required")
        return namespace if kind.namespaced else ""

    def _current(self, kind: Kind, namespace: str, name: str) -> dict:
        obj = self.store.get(kind, (namespace, name))
        if obj is None:
            raise not_found(kind, name)
        return obj

    # reads -------------------------------------------------------------------------------------

    def get(self, resource: str, name: str, *, namespace: str | None = None) -> dict:
        kind = self.kind(resource)
        return clone(self._current(kind, self._scope(kind, namespace) if kind.namespaced else "", name))

    def list(self, resource: str, *, namespace: str | None = None, label_selector: str = "",
             field_selector: str = "") -> list[dict]:
        objects, _ = self.select(self.kind(resource), namespace, label_selector, field_selector)
        return [clone(o) for o in objects]

    def select(self, kind: Kind, namespace: str | None, label_selector: str = "",
               field_selector: str = "") -> tuple[list[dict], int]:
        """Stored objects (shared, not copies: serialize, don't mutate) and the resourceVersion of the list."""
        labels = parse_labels(label_selector)
        fields = parse_fields(field_selector, kind, label_selector)
        with self.store.lock:
            objects = self.store.list(kind, namespace if kind.namespaced else None, labels, fields)
            return objects, self.store.resource_version

    # create ------------------------------------------------------------------------------------

    def create(self, resource: str, obj: dict, *, namespace: str | None = None, user: User = ADMIN,
               dry_run: bool = False, options: dict | None = None, warnings: list[str] | None = None) -> dict:
        kind = self.kind(resource)
        if kind.plural == "bindings":
            name = (obj.get("metadata") or {}).get("name", "")
            return self.create_binding(namespace or obj["metadata"].get("namespace", ""), name, obj, user=user,
                                       warnings=warnings)
        obj = clone(obj)
        meta = obj.setdefault("metadata", {})
        self._written("create", kind, "", meta.get("name") or meta.get("generateName", ""), user)
        namespace = self._scope(kind, namespace or meta.get("namespace"))
        if kind.namespaced and meta.get("namespace", namespace) != namespace:
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        if kind.namespaced:
            meta["namespace"] = namespace
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
        apply_defaults(kind.plural, obj, creating=True)
        if kind.plural == "pods":
            self._admit_priority(obj)
        self._check_namespace_open(kind, namespace, meta.get("name") or meta.get("generateName", ""))
        attrs = Attributes(kind, "CREATE", meta.get("name", ""), namespace, user, dry_run=dry_run,
                           options=dict(options or {}))
        obj, mutate_warnings = self.admission.mutate(attrs, obj)
        prepare_for_create(kind.plural, obj, self._now(), self._draw)
        if kind.plural == PODDISRUPTIONBUDGETS:
            obj["status"] = disruption.initial_status()
        self._validate_create(kind, obj)
        attrs.name = obj["metadata"]["name"]
        validate_warnings = self.admission.validate(attrs, obj)
        _extend(warnings, mutate_warnings + validate_warnings)
        if dry_run:
            return obj
        with self.store.lock:
            if self.store.get(kind, (namespace, obj["metadata"]["name"])) is not None:
                raise already_exists(kind, obj["metadata"]["name"])
            stored = self.store.commit(kind, obj, "ADDED")
        self.store.deliver()
        return clone(stored)

    def _check_namespace_open(self, kind: Kind, namespace: str, name: str) -> None:
        if not kind.namespaced:
            return
        namespaces = self.kinds.by_name("namespaces")
        current = self.store.get(namespaces, ("", namespace))
        if current is None:
            raise not_found(namespaces, namespace)
        if current["metadata"].get("deletionTimestamp"):
            error = forbidden(kind.group, kind.plural, name, f"unable to create new content in namespace {namespace} "
                                                             "because it is being terminated")
            error.status["details"]["causes"] = [{"reason": "NamespaceTerminating", "field": "metadata.namespace",
                                                  "message": f"namespace {namespace} is being terminated"}]
            raise error

    def _validate_create(self, kind: Kind, obj: dict) -> None:
        meta = obj["metadata"]
        errors = []
        if not meta.get("name"):
            errors.append(FieldError("metadata.name", "Required", "name or generateName is required"))
        elif not _DNS_SUBDOMAIN.match(meta["name"]) or len(meta["name"]) > 253:
            errors.append(FieldError("metadata.name", "Invalid", _SUBDOMAIN_HELP, meta["name"]))
        if kind.plural == "pods":
            errors += podrules.validate_create(obj)
        elif kind.plural == PODDISRUPTIONBUDGETS:
            errors += disruption.validate_spec(obj)
        elif kind.plural == PRIORITY_CLASSES:
            errors += priority.class_problems(obj, self.store.list(kind))
        elif kind.plural == RESOURCE_SLICES:
            errors += devices.slice_problems(obj)
        elif kind.plural == PROVISIONING_REQUESTS:
            errors += provisioningrequests.problems(obj)
        if errors:
            raise invalid(kind, meta.get("name", ""), errors)
        if kind.plural == PRIORITY_CLASSES:
            refusal = priority.second_default(obj, self.store.list(kind))
            if refusal:
                raise forbidden(kind.group, kind.plural, meta["name"], refusal)

    def _admit_priority(self, pod: dict) -> None:
        """The Priority admission plugin (`sim.priority`): the pod's priority from its PriorityClass."""
        kind = self.kinds.by_name(PRIORITY_CLASSES)
        try:
            priority.admit_pod(pod.setdefault("spec", {}), lambda name: self.store.get(kind, ("", name)),
                               lambda: next((c for c in self.store.list(kind) if c.get("globalDefault")), None))
        except priority.Refused as refused:
            raise forbidden("", "pods", pod["metadata"].get("name", ""), str(refused)) from None

    # update and patch --------------------------------------------------------------------------

    def update(self, resource: str, obj: dict, *, namespace: str | None = None, subresource: str = "",
               user: User = ADMIN, dry_run: bool = False, options: dict | None = None,
               warnings: list[str] | None = None) -> dict:
        """PUT: replace the object; a resourceVersion in the body makes it conditional."""
        kind = self.kind(resource)
        name = (obj.get("metadata") or {}).get("name", "")
        self._written("update", kind, subresource, name, user)
        return self._update(kind, self._scope(kind, namespace or (obj.get("metadata") or {}).get("namespace")), name,
                            lambda current: clone(obj), subresource, user, dry_run, options, warnings)

    def patch(self, resource: str, name: str, patch: dict | list, *, namespace: str | None = None,
              patch_type: str = MERGE_PATCH, subresource: str = "", user: User = ADMIN, dry_run: bool = False,
              options: dict | None = None, warnings: list[str] | None = None) -> dict:
        kind = self.kind(resource)
        self._written("patch", kind, subresource, name, user)
        apply = _patcher(kind, patch_type, patch)
        return self._update(kind, self._scope(kind, namespace), name, apply, subresource, user, dry_run,
                            options, warnings)

    def _update(self, kind: Kind, namespace: str, name: str, change: Callable[[dict], dict], subresource: str,
                user: User, dry_run: bool, options: dict | None, warnings: list[str] | None) -> dict:
        """GuaranteedUpdate: re-apply the change to a fresh read when another write won the race,
        unless the request named the resourceVersion it expects (then 409)."""
        for _ in range(_UPDATE_RETRIES):
            current = self._current(kind, namespace, name)
            proposed, settled = self._proposed(kind, current, change(current), name, subresource)
            expected = proposed["metadata"].get("resourceVersion")
            if expected and expected != current["metadata"]["resourceVersion"]:
                raise stale(kind, name)
            if _same(proposed, current):
                return clone(current)
            attrs = Attributes(kind, "UPDATE", name, namespace, user, subresource, old=current, dry_run=dry_run,
                               options=dict(options or {}))
            new, mutate_warnings = self.admission.mutate(attrs, proposed)
            if new is not proposed or not settled:
                new, _ = self._proposed(kind, current, new, name, subresource)
            self._validate_update(kind, current, new, subresource)
            _extend(warnings, mutate_warnings + self.admission.validate(attrs, new))
            if dry_run:
                return clone(new)
            with self.store.lock:
                latest = self.store.get(kind, (namespace, name))
                if latest is None:
                    raise not_found(kind, name)
                if latest["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"]:
                    if expected:
                        raise stale(kind, name)
                    continue
                stored = self._commit_update(kind, new)
            self.store.deliver()
            return clone(stored)
        raise conflict(kind, name, "the object has been modified; please apply your changes to the latest version "
                                   "and try again")

    def _proposed(self, kind: Kind, current: dict, new: dict, name: str, subresource: str) -> tuple[dict, bool]:
        """The object as the update would store it: server-owned metadata kept, spec or status reset per endpoint.

        Also whether it is settled: proposing it again would give it unchanged, so an object no
        mutating webhook changed need not be proposed a second time. The fixups of metadata and
        status and the generation repeat exactly and the defaults only fill in what is missing;
        only a field that omitting empty lists removed may be defaulted anew (a namespace's
        `finalizers: []`), so an object that lost one is not settled."""
        new = clone(new)
        meta = new.setdefault("metadata", {})
        if meta.get("name", name) != name:
            raise bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL ({name})")
        if meta.get("uid") and meta["uid"] != current["metadata"].get("uid"):
            raise invalid(kind, name, [FieldError("metadata.uid", "Invalid", "field is immutable", meta["uid"])])
        for key in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                    "generation"):
            if key in current["metadata"]:
                meta[key] = current["metadata"][key]
            else:
                meta.pop(key, None)
        new["apiVersion"], new["kind"] = kind.api_version, kind.kind
        if subresource == "status":
            new = dict(current, metadata=dict(current["metadata"], resourceVersion=meta.get("resourceVersion")),
                       status=new.get("status"))
        elif "status" in kind.subresources:
            new["status"] = current.get("status")
            if new["status"] is None:
                del new["status"]
        if subresource != "status":
            apply_defaults(kind.plural, new, creating=False)
        settled = True
        if kind.strategic_merge:
            defaulted, new = new, _omit_empty(new)
            settled = new is defaulted
        if _spec_of(new) != _spec_of(current) and "generation" in current["metadata"]:
            new["metadata"]["generation"] = current["metadata"]["generation"] + 1
        return new, settled

    def _validate_update(self, kind: Kind, current: dict, new: dict, subresource: str) -> None:
        errors = []
        if kind.plural == "pods" and subresource != "status":
            errors = podrules.validate_update(current, new)
        elif kind.plural == PODDISRUPTIONBUDGETS:
            errors = disruption.validate_status(new) if subresource == "status" else disruption.validate_spec(new)
        elif kind.plural == PRIORITY_CLASSES:
            others = [c for c in self.store.list(kind) if c["metadata"]["name"] != new["metadata"]["name"]]
            errors = priority.class_problems(new, others, current)
        elif kind.plural == PROVISIONING_REQUESTS and subresource != "status":
            errors = provisioningrequests.problems(new) + provisioningrequests.immutable_problems(current, new)
        elif kind.plural == RESOURCE_SLICES:
            errors = devices.slice_problems(new, current)
        if errors:
            raise invalid(kind, current["metadata"]["name"], errors)

    def _commit_update(self, kind: Kind, new: dict) -> dict:
        """Store the update; an object being deleted whose last finalizer went is removed instead."""
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            gone = self.store.remove(kind, (meta.get("namespace", ""), meta["name"]))
            self._collect_garbage(gone, kind)
            return gone
        return self.store.commit(kind, new, "MODIFIED")

    # delete ------------------------------------------------------------------------------------

    def delete(self, resource: str, name: str, *, namespace: str | None = None, user: User = ADMIN,
               grace_period_seconds: int | None = None, propagation_policy: str | None = None,
               preconditions: dict | None = None, dry_run: bool = False,
               warnings: list[str] | None = None) -> dict:
        """DELETE; returns the object as deleted, or as marked for deletion (finalizers, graceful pod deletion)."""
        kind = self.kind(resource)
        self._written("delete", kind, "", name, user)
        namespace = self._scope(kind, namespace)
        current = self._current(kind, namespace, name)
        _check_preconditions(kind, current, preconditions or {})
        attrs = Attributes(kind, "DELETE", name, namespace, user, old=current, dry_run=dry_run,
                           options={k: v for k, v in (("gracePeriodSeconds", grace_period_seconds),
                                                      ("propagationPolicy", propagation_policy)) if v is not None})
        _extend(warnings, self.admission.validate(attrs, None))
        if dry_run:
            return clone(current)
        if kind.plural == "namespaces":
            return self._delete_namespace(current)
        grace = self._grace_period(kind, current, grace_period_seconds)
        with self.store.lock:
            stored, gone = self._delete_stored(kind, self._current(kind, namespace, name), grace)
        if gone is not None:
            self._collect_garbage(gone, kind, propagation_policy)
        self.store.deliver()
        return clone(stored)

    def _delete_stored(self, kind: Kind, current: dict, grace: int) -> tuple[dict, dict | None]:
        """Under the store lock: an object with finalizers or a grace period is marked deleted, any
        other removed. Returns what is stored (or was removed), and the removed object or None."""
        if current["metadata"].get("finalizers") or grace:
            return self._mark_deleted(kind, current, grace), None
        gone = self.store.remove(kind, key_of(current))
        return gone, gone

    def _grace_period(self, kind: Kind, pod: dict, requested: int | None) -> int:
        """Seconds a bound, running pod is given to stop; 0 for everything the kubelet need not stop."""
        if kind.plural != "pods" or not pod["spec"].get("nodeName"):
            return 0
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return 0
        grace = requested if requested is not None else pod["spec"].get("terminationGracePeriodSeconds", 30)
        return max(int(grace), 0)

    def _mark_deleted(self, kind: Kind, current: dict, grace: int) -> dict:
        meta = current["metadata"]
        if meta.get("deletionTimestamp") and (not grace or grace >= meta.get("deletionGracePeriodSeconds", 0)):
            return current
        marked = dict(current, metadata=dict(meta, deletionTimestamp=rfc3339(self.clock() + grace),
                                             deletionGracePeriodSeconds=grace))
        if grace and "generation" in meta:
            marked["metadata"]["generation"] = meta["generation"] + 1
        return self.store.commit(kind, marked, "MODIFIED")

    def _delete_namespace(self, namespace: dict) -> dict:
        """Terminating, then every object in it deleted, then the namespace itself: the namespace controller's job."""
        kind, name = self.kinds.by_name("namespaces"), namespace["metadata"]["name"]
        with self.store.lock:
            terminating = dict(namespace, metadata=dict(namespace["metadata"], deletionTimestamp=self._now(),
                                                        deletionGracePeriodSeconds=0),
                               status={"phase": "Terminating"})
            self.store.commit(kind, terminating, "MODIFIED")
        for content_kind in (k for k in self.kinds.kinds if k.namespaced):
            for obj in self.store.list(content_kind, name):
                self._force_delete(content_kind, obj)
        with self.store.lock:
            gone = self.store.remove(kind, ("", name))
        self.store.deliver()
        return clone(gone)

    def _force_delete(self, kind: Kind, obj: dict) -> None:
        with self.store.lock:
            key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            if self.store.get(kind, key) is not None:
                self.store.remove(kind, key)

    def _collect_garbage(self, owner: dict, owner_kind: Kind, policy: str | None = None) -> None:
        """Background propagation, done at once: dependents whose owners are all gone are deleted;
        with the Orphan policy the owner reference is removed from them instead."""
        uid = owner["metadata"].get("uid", "")
        policy = policy or ("Orphan" if owner_kind.plural in _ORPHAN_BY_DEFAULT else "Background")
        for kind, (namespace, name) in self.store.dependents(uid):
            dependent = self.store.get(kind, (namespace, name))
            if dependent is None:
                continue
            refs = dependent["metadata"].get("ownerReferences") or []
            try:
                if policy == "Orphan":
                    remaining = [r for r in refs if r.get("uid") != uid]
                    self.patch(self.resource_name(kind), name, {"metadata": {"ownerReferences": remaining or None}},
                               namespace=namespace or None, user=GARBAGE_COLLECTOR)
                elif not any(self.store.exists_uid(r.get("uid", "")) for r in refs):
                    self.delete(self.resource_name(kind), name, namespace=namespace or None, user=GARBAGE_COLLECTOR)
            except APIError as e:
                if e.code != 404:
                    raise

    # binding -----------------------------------------------------------------------------------

    def bind(self, namespace: str, name: str, node: str, *, user: User = SCHEDULER) -> None:
        self.create_binding(namespace, name, {"apiVersion": "v1", "kind": "Binding",
                                              "metadata": {"name": name, "namespace": namespace},
                                              "target": {"apiVersion": "v1", "kind": "Node", "name": node}}, user=user)

    def create_binding(self, namespace: str, name: str, binding: dict, *, user: User = SCHEDULER,
                       warnings: list[str] | None = None) -> dict:
        """POST pods/NAME/binding: set spec.nodeName of a pod that is neither bound, gated nor being deleted."""
        pods = self.kinds.by_name("pods")
        self._written("create", pods, "binding", name, user)
        target = binding.get("target") or {}
        if (binding.get("metadata") or {}).get("name", name) != name:
            raise bad_request(f"the name of the object ({binding['metadata']['name']}) does not match the name on "
                              f"the URL ({name})")
        if not target.get("name"):
            raise invalid(pods, name, [FieldError("target.name", "Required", "")])
        attrs = Attributes(pods, "CREATE", name, namespace, user, "binding", request_kind=_BINDING_KIND)
        binding, mutate_warnings = self.admission.mutate(attrs, binding)
        _extend(warnings, mutate_warnings + self.admission.validate(attrs, binding))
        with self.store.lock:
            pod = self._current(pods, namespace, name)
            why = podrules.binding_conflict(pod)
            if why:
                raise conflict(pods, name, why, "binding")
            self.store.commit(pods, self._bound(pod, binding), "MODIFIED")
        self.store.deliver()
        return success(201)

    def _bound(self, pod: dict, binding: dict) -> dict:
        annotations = dict(pod["metadata"].get("annotations") or {})
        annotations.update((binding.get("metadata") or {}).get("annotations") or {})
        meta = dict(pod["metadata"], annotations=annotations) if annotations else dict(pod["metadata"])
        status = dict(pod.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        status["conditions"] = conditions + [{"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                                              "lastTransitionTime": self._now()}]
        return dict(pod, metadata=meta, spec=dict(pod["spec"], nodeName=binding["target"]["name"]), status=status)

    # eviction ----------------------------------------------------------------------------------

    def evict(self, namespace: str, name: str, *, grace_period_seconds: int | None = None,
              user: User = ADMIN) -> dict:
        """What a client's POST pods/NAME/eviction does, with the Eviction built from the grace period."""
        return self.create_eviction(namespace, name, eviction(namespace, name, grace_period_seconds), user=user)

    def create_eviction(self, namespace: str, name: str, body: dict, *, user: User = ADMIN, dry_run: bool = False,
                        options: dict | None = None, warnings: list[str] | None = None) -> dict:
        """POST pods/NAME/eviction, decided as `sim.eviction` describes. Admission sees a CREATE of
        pods/eviction with the Eviction; then the pod and its budgets are read and the writes (the
        budget's status, the pod's DisruptionTarget condition, its deletion) committed under one
        store lock, none of them through admission again. (Upstream writes the budget's status
        through its loopback client, so webhooks on poddisruptionbudgets/status would see it.)"""
        pods = self.kinds.by_name("pods")
        self._written("create", pods, "eviction", name, user)
        check_request(namespace, name, body)
        attrs = Attributes(pods, "CREATE", name, namespace, user, "eviction", dry_run=dry_run,
                           options=dict(options or {}), request_kind=EVICTION_KIND)
        body, mutate_warnings = self.admission.mutate(attrs, body)
        _extend(warnings, mutate_warnings + self.admission.validate(attrs, body))
        deletion = body.get("deleteOptions") or {}
        dry_run = dry_run or "All" in (deletion.get("dryRun") or ())
        budgets = self.kinds.by_name(PODDISRUPTIONBUDGETS)
        with self.store.lock:
            pod = self._current(pods, namespace, name)
            budget = None if can_ignore_budgets(pod) else budget_to_charge(pod, self.store.list(budgets, namespace))
            budget_status = None if budget is None else charged(budget, name, self._now())
            conflict = precondition_conflict(pod, deletion.get("preconditions") or {})
            if conflict is not None:
                raise conflict
            if dry_run:
                return success(201)
            if budget_status is not None:
                self.store.commit(budgets, _with_status(budget, budget_status), "MODIFIED")
            pod = self._disruption_targeted(pods, pod)
            _, gone = self._delete_stored(pods, pod, self._grace_period(pods, pod, deletion.get("gracePeriodSeconds")))
        if gone is not None:
            self._collect_garbage(gone, pods, deletion.get("propagationPolicy"))
        self.store.deliver()
        return success(201)

    def _disruption_targeted(self, pods: Kind, pod: dict) -> dict:
        """Under the store lock: the pod with the DisruptionTarget condition, committed when it changed."""
        status = with_disruption_target(pod, self._now())
        return pod if status == pod.get("status") else self.store.commit(pods, _with_status(pod, status), "MODIFIED")

    # watch -------------------------------------------------------------------------------------

    def subscribe(self, callback: Callable[[WatchEvent], None]) -> Callable[[], None]:
        return self.store.subscribe(lambda change: callback(as_watch_event(change, self.resource_name(change.kind))))

    def watch(self, kind: Kind, since: int):
        """A watcher of `kind` holding every change after `since`; raises APIError 410 when compacted."""
        try:
            return self.store.watch(kind, since)
        except ValueError as oldest:
            raise APIError(status(410, "Expired", f"too old resource version: {since} ({oldest.args[0]})")) from None


def _patcher(kind: Kind, patch_type: str, patch) -> Callable[[dict], dict]:
    content_type = patch_type.split(";")[0].strip()
    if content_type == JSON_PATCH:
        return lambda current: apply_json_patch(current, patch)
    if not isinstance(patch, dict):
        raise bad_request("json: cannot unmarshal array into Go value of type map[string]interface {}")
    if content_type == MERGE_PATCH:
        return lambda current: apply_merge_patch(current, patch)
    if content_type == STRATEGIC_MERGE_PATCH and kind.strategic_merge:
        return lambda current: apply_strategic_merge_patch(current, patch)
    accepted = [JSON_PATCH, MERGE_PATCH] + ([STRATEGIC_MERGE_PATCH] if kind.strategic_merge else [])
    raise unsupported_media_type(", ".join(accepted))


def _check_preconditions(kind: Kind, current: dict, preconditions: dict) -> None:
    meta = current["metadata"]
    for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
        wanted = preconditions.get(field)
        if wanted and wanted != meta.get(field):
            raise conflict(kind, meta["name"], f"Precondition failed: {label} in precondition: {wanted}, "
                                               f"{label} in object meta: {meta.get(field)}")


def _with_status(stored: dict, status: dict) -> dict:
    """A new version of a stored object (its metadata copied: the commit sets the resourceVersion)."""
    return dict(stored, metadata=dict(stored["metadata"]), status=status)


def _spec_of(obj: dict) -> dict:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def _same(new: dict, current: dict) -> bool:
    """A no-op write: the real server neither bumps the resourceVersion nor sends an event."""
    strip = {"resourceVersion", "managedFields"}
    return (_spec_of(new) == _spec_of(current) and new.get("status") == current.get("status")
            and {k: v for k, v in new["metadata"].items() if k not in strip}
            == {k: v for k, v in current["metadata"].items() if k not in strip})


def _omit_empty(value):
    """Built-in types marshal empty lists as absent (`omitempty`): a patch that empties one removes the field.

    A dict or list with nothing to omit anywhere inside is returned itself, not copied: the
    object proposed is a fresh copy already, and a pod's usual update has nothing to omit, so
    building it anew was a second deep copy on every write."""
    if isinstance(value, dict):
        kept = None
        for index, (key, item) in enumerate(value.items()):
            omitted = _omit_empty(item) if isinstance(item, (dict, list)) else item
            if kept is None and (omitted is not item or omitted == []):
                kept = dict(itertools.islice(value.items(), index))
            if kept is not None and omitted != []:
                kept[key] = omitted
        return value if kept is None else kept
    if isinstance(value, list):
        kept = None
        for index, item in enumerate(value):
            omitted = _omit_empty(item) if isinstance(item, (dict, list)) else item
            if kept is None and omitted is not item:
                kept = value[:index]
            if kept is not None:
                kept.append(omitted)
        return value if kept is None else kept
    return value


def _extend(warnings: list[str] | None, more: list[str]) -> None:
    if warnings is not None:
        warnings.extend(more)

