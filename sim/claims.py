"""The emulated resourceclaim controller of kube-controller-manager: ResourceClaims from templates.

For every pod neither being deleted nor done, each `spec.resourceClaims` entry that names a
ResourceClaimTemplate and has no claim recorded in the pod's `status.resourceClaimStatuses` gets
one: a claim the pod already owns for that entry (made before a status write failed) or a new
one, named `<pod>-<entry>-` plus five random characters by the API server (both parts cut in
proportion when they would pass 57 characters), owned by the pod (controller, blocking its
deletion), with the template's labels, annotations and spec and the annotation naming the entry.
All of a pod's new claims are then recorded in one status write. The controller acts as soon as
the pod exists: it never looks at scheduling gates, so a gated gang member has its claims at once.
A pod bound without the scheduler gets its allocated claims reserved.

For every claim: reservations of pods that are gone, replaced (another uid) or done (terminal, or
deleted before being scheduled) are dropped; a claim nothing uses any more is deallocated (when
the scheduler's finalizer says it allocated it) and the finalizer removed; a claim made for a pod
that is done is deleted. The garbage collector deletes the claims of a deleted pod, which the
finalizer holds until the reservation is dropped here. Not modelled: the FailedResourceClaimCreation
Event for a missing template (the pod simply waits until the template exists) and admin access.
"""

from collections.abc import Mapping

from sim.api import APIError, ClusterAPI, WatchEvent, service_account
from sim.dra import RESERVED_FOR_MAX, controlled_by, reserved_for
from sim.names import (
    CLAIM_FINALIZER,
    POD_CLAIM_NAME_ANNOTATION,
    PODS,
    RESOURCE_API_VERSION,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
)

RESOURCE_CLAIM_CONTROLLER = service_account("kube-system", "resource-claim-controller")
MAX_BASE_NAME = 57  # leaves room for the generated suffix in a 63-character name
TERMINAL_PHASES = ("Succeeded", "Failed")
Key = tuple[str, str]


def key_of(obj: Mapping) -> Key:
    return obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def generate_name(pod: str, entry: str) -> str:
    base = f"{pod}-{entry}-"
    if len(base) <= MAX_BASE_NAME:
        return base
    return f"{pod[:len(pod) * MAX_BASE_NAME // len(base)]}-{entry[:len(entry) * MAX_BASE_NAME // len(base)]}"


def claim_from_template(pod: Mapping, entry: str, template: Mapping) -> dict:
    meta = pod["metadata"]
    template_meta = (template.get("spec") or {}).get("metadata") or {}
    metadata = {"generateName": generate_name(meta["name"], entry), "namespace": meta.get("namespace", ""),
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta.get("uid", ""),
                                     "controller": True, "blockOwnerDeletion": True}],
                "annotations": {**(template_meta.get("annotations") or {}), POD_CLAIM_NAME_ANNOTATION: entry}}
    if template_meta.get("labels"):
        metadata["labels"] = dict(template_meta["labels"])
    return {"apiVersion": RESOURCE_API_VERSION, "kind": "ResourceClaim", "metadata": metadata,
            "spec": (template.get("spec") or {}).get("spec") or {}}


def is_done(pod: Mapping) -> bool:
    """Certain never to run (again): terminal, or deleted before being scheduled."""
    return (pod.get("status") or {}).get("phase") in TERMINAL_PHASES or \
        bool(pod["metadata"].get("deletionTimestamp") and not (pod.get("spec") or {}).get("nodeName"))


def owning_pod(claim: Mapping) -> Mapping | None:
    return next((r for r in claim["metadata"].get("ownerReferences") or ()
                 if r.get("controller") and r.get("apiVersion") == "v1" and r.get("kind") == "Pod"), None)


class ClaimController:
    resources = (PODS, RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES)

    def __init__(self, api: ClusterAPI):
        self.api = api
        self.pods: dict[Key, dict] = {}
        self.claims: dict[Key, dict] = {}
        self.templates: dict[Key, dict] = {}
        self.deleted_pods: set[str] = set()  # uids
        self.dirty_pods: set[Key] = set()
        self.dirty_claims: set[Key] = set()

    # --- watch ------------------------------------------------------------------------------
    def observe(self, event: WatchEvent, now: float) -> None:
        obj, key = event.object, key_of(event.object)
        if event.resource == PODS:
            self._put(self.pods, key, obj, event.type)
            if event.type == "DELETED":
                self.deleted_pods.add(obj["metadata"].get("uid", ""))
            if (obj.get("spec") or {}).get("resourceClaims"):
                self.dirty_pods.add(key)
            if self.claims:
                self.dirty_claims |= {c for c, claim in self.claims.items()
                                      if c[0] == key[0] and self._concerns(claim, obj)}
        elif event.resource == RESOURCE_CLAIMS:
            self._put(self.claims, key, obj, event.type)
            self.dirty_claims.add(key)
            owner = owning_pod(obj)
            if owner is not None:
                self.dirty_pods.add((key[0], owner.get("name", "")))
        else:
            self._put(self.templates, key, obj, event.type)
            self.dirty_pods |= {p for p, pod in self.pods.items()
                                if p[0] == key[0] and (pod.get("spec") or {}).get("resourceClaims")}

    @staticmethod
    def _put(table: dict, key: Key, obj: dict, kind: str) -> None:
        if kind == "DELETED":
            table.pop(key, None)
        else:
            table[key] = obj

    @staticmethod
    def _concerns(claim: Mapping, pod: Mapping) -> bool:
        return reserved_for(claim, pod) or controlled_by(claim, pod)

    def step(self, now: float) -> bool:
        wrote = False
        while self.dirty_pods or self.dirty_claims:
            pods, self.dirty_pods = sorted(self.dirty_pods), set()
            claims, self.dirty_claims = sorted(self.dirty_claims), set()
            for key in pods:
                wrote |= self._sync_pod(key)
            for key in claims:
                wrote |= self._sync_claim(key)
        return wrote

    def next_due(self) -> float | None:
        return None

    # --- pods: claims from templates, reservations of pods bound directly -----------------------
    def _sync_pod(self, key: Key) -> bool:
        pod = self.pods.get(key)
        if pod is None or pod["metadata"].get("deletionTimestamp") or is_done(pod) or \
                not pod["spec"].get("resourceClaims"):
            return False
        made: dict[str, str] = {}
        for entry in pod["spec"]["resourceClaims"]:
            name = self._claim_for(pod, entry)
            if name is not None:
                made[entry["name"]] = name
        wrote = bool(made) and self._record(pod, made)
        if pod["spec"].get("nodeName"):
            wrote |= self._reserve_for_bound(pod)
        return wrote

    def _claim_for(self, pod: dict, entry: Mapping) -> str | None:
        """The name of the claim made for a template entry that the pod's status lacks, None when
        there is nothing to do (recorded, no template, or the template not there yet)."""
        template = entry.get("resourceClaimTemplateName")
        if not template:
            return None
        statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or ()
        recorded = next((s for s in statuses if s.get("name") == entry["name"]), None)
        if recorded is not None:
            current = self.claims.get((key_of(pod)[0], recorded.get("resourceClaimName") or ""))
            if not recorded.get("resourceClaimName") or (current is not None and controlled_by(current, pod)):
                return None
        orphan = next((c for (namespace, _), c in self.claims.items() if namespace == key_of(pod)[0]
                       and controlled_by(c, pod)
                       and (c["metadata"].get("annotations") or {}).get(POD_CLAIM_NAME_ANNOTATION) == entry["name"]),
                      None)
        if orphan is not None:
            return orphan["metadata"]["name"]
        source = self.templates.get((key_of(pod)[0], template))
        if source is None:
            return None
        try:
            created = self.api.create(RESOURCE_CLAIMS, claim_from_template(pod, entry["name"], source),
                                      namespace=key_of(pod)[0], user=RESOURCE_CLAIM_CONTROLLER)
        except APIError:
            return None
        self.claims[key_of(created)] = created
        return created["metadata"]["name"]

    def _record(self, pod: dict, made: dict[str, str]) -> bool:
        statuses = [s for s in (pod.get("status") or {}).get("resourceClaimStatuses") or () if s.get("name") not in made]
        statuses += [{"name": entry, "resourceClaimName": name} for entry, name in sorted(made.items())]
        try:
            self.api.patch(PODS, pod["metadata"]["name"], {"status": {"resourceClaimStatuses": statuses}},
                           namespace=key_of(pod)[0], subresource="status", user=RESOURCE_CLAIM_CONTROLLER)
        except APIError:
            return False
        return True

    def _reserve_for_bound(self, pod: dict) -> bool:
        wrote = False
        statuses = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()}
        for entry in pod["spec"]["resourceClaims"]:
            claim = self.claims.get((key_of(pod)[0], entry.get("resourceClaimName") or statuses.get(entry["name"]) or ""))
            status = (claim or {}).get("status") or {}
            if claim is None or not status.get("allocation") or reserved_for(claim, pod) or \
                    len(status.get("reservedFor") or ()) >= RESERVED_FOR_MAX:
                continue
            reference = {"resource": "pods", "name": pod["metadata"]["name"], "uid": pod["metadata"]["uid"]}
            wrote |= self._patch_status(claim, {"reservedFor": list(status.get("reservedFor") or ()) + [reference]})
        return wrote

    # --- claims: stale reservations, deallocation, claims of pods that are done ----------------
    def _sync_claim(self, key: Key) -> bool:
        claim = self.claims.get(key)
        if claim is None:
            return False
        reserved = (claim.get("status") or {}).get("reservedFor") or []
        valid = [r for r in reserved if self._in_use_by(key[0], r)]
        protected = CLAIM_FINALIZER in (claim["metadata"].get("finalizers") or ())
        wrote = False
        if len(valid) < len(reserved) or (protected and claim["metadata"].get("deletionTimestamp") and not valid):
            change = {"reservedFor": valid or None}
            if not valid and protected:
                change["allocation"] = None
            wrote = self._patch_status(claim, change)
            claim = self.claims.get(key, claim)
            if wrote and protected and not (claim.get("status") or {}).get("allocation"):
                wrote = self._drop_finalizer(claim)
        if not valid:
            wrote |= self._delete_if_pod_done(key, claim)
        return wrote

    def _in_use_by(self, namespace: str, reference: Mapping) -> bool:
        if reference.get("apiGroup") or reference.get("resource") != "pods":
            return True
        if reference.get("uid") in self.deleted_pods:
            return False
        pod = self.pods.get((namespace, reference.get("name", "")))
        if pod is None:
            try:
                pod = self.api.get(PODS, reference.get("name", ""), namespace=namespace)
            except APIError:
                return False
        return pod["metadata"].get("uid") == reference.get("uid") and not is_done(pod)

    def _delete_if_pod_done(self, key: Key, claim: dict) -> bool:
        owner = owning_pod(claim)
        pod = self.pods.get((key[0], owner.get("name", ""))) if owner else None
        if pod is None or claim["metadata"].get("deletionTimestamp") or \
                (pod["metadata"].get("uid") == owner.get("uid") and not is_done(pod)):
            return False
        try:
            self.api.delete(RESOURCE_CLAIMS, key[1], namespace=key[0], user=RESOURCE_CLAIM_CONTROLLER)
        except APIError:
            return False
        return True

    def _patch_status(self, claim: dict, change: dict) -> bool:
        try:
            updated = self.api.patch(RESOURCE_CLAIMS, claim["metadata"]["name"], {
                "metadata": {"resourceVersion": claim["metadata"]["resourceVersion"]}, "status": change},
                namespace=key_of(claim)[0], subresource="status", user=RESOURCE_CLAIM_CONTROLLER)
        except APIError:
            return False
        self.claims[key_of(claim)] = updated
        return True

    def _drop_finalizer(self, claim: dict) -> bool:
        remaining = [f for f in claim["metadata"].get("finalizers") or () if f != CLAIM_FINALIZER]
        try:
            self.api.patch(RESOURCE_CLAIMS, claim["metadata"]["name"], {"metadata": {
                "resourceVersion": claim["metadata"]["resourceVersion"], "finalizers": remaining or None}},
                namespace=key_of(claim)[0], user=RESOURCE_CLAIM_CONTROLLER)
        except APIError:
            return False
        return True
