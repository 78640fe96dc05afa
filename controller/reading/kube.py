"""The controller's one door to the Kubernetes API: the only module that imports `kubernetes`.

Objects travel as plain dicts parsed with `orjson`: the client's generated models cost
milliseconds per pod, and a cluster of 50,000 pods would spend minutes in deserialisation on
every relist. A list or watch given a `Reading` (`controller.reading.shapes`: the informers' pods and
nodes) decodes only the fields of its shape. The client is used for what it does well — kubeconfig and in-cluster credentials,
token refresh, TLS and the connection pool — through its low-level `param_serialize` and
`call_api`, which return the raw, not yet read urllib3 response.

Every refusal becomes a typed error decided by `classify(status, body)`, a pure function, so
callers branch on *conflict* (re-read and decide again), *temporary* (retried here with backoff,
honouring Retry-After) and *permanent* (report it) instead of on status codes.
"""

from __future__ import annotations  # `Kube.list` shadows the builtin in annotations

import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from gangkeeper import integrations
from gangkeeper.controller.model.capacity import POD_TEMPLATES, PROVISIONING_REQUESTS
from gangkeeper.controller.reading.shapes import Reading
from gangkeeper.integrations import gang, pytorchjob
from gangkeeper.integrations.kind import Resource

log = logging.getLogger("gangkeeper.controller.kube")

# Named here, where `list` is the builtin: in the class's annotations it is `Kube.list`.
Query = list[tuple[str, str | int]]  # a request's query parameters
Items = list[Any]  # the items of a list

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON = "application/json"
# Objects' metadata alone, or (a server that does not serve it) the objects whole.
METADATA_LIST = f"{JSON};as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,{JSON}"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH)


# --- resources ------------------------------------------------------------------------------
# `Resource` is the integrations' (gangkeeper.integrations.kind): each workload kind defines its
# own resource once, and the controller lists, watches and writes exactly that object.

PODS = Resource("", "v1", "pods", "Pod")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
EVENTS = Resource("", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
# What decides where a member may go besides resources (controller.cache.occupancy): devices, claims, volumes.
DEVICE_CLASSES = Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", namespaced=False)
RESOURCE_SLICES = Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", namespaced=False)
RESOURCE_CLAIMS = Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim")
RESOURCE_CLAIM_TEMPLATES = Resource("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate")
PERSISTENT_VOLUME_CLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
PERSISTENT_VOLUMES = Resource("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False)
OCCUPANCY = (DEVICE_CLASSES, RESOURCE_SLICES, RESOURCE_CLAIMS, RESOURCE_CLAIM_TEMPLATES, PERSISTENT_VOLUME_CLAIMS,
             PERSISTENT_VOLUMES)
# Whom preemption may evict (controller.cache.budgets).
POD_DISRUPTION_BUDGETS = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
# Named for the code that uses these kinds by name: the Executor writes Gangs, tests watch PyTorchJobs.
GANGS = gang.RESOURCE
PYTORCHJOBS = pytorchjob.RESOURCE

RESOURCES = {r.name: r for r in (PODS, NODES, NAMESPACES, EVENTS, LEASES, *OCCUPANCY, POD_DISRUPTION_BUDGETS,
                                 PROVISIONING_REQUESTS, POD_TEMPLATES,
                                 *integrations.RESOURCES)}


def eviction(namespace: str, name: str, uid: str) -> dict:
    """The Eviction that asks the Eviction API to evict this very pod (`uid`)."""
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": {"preconditions": {"uid": uid}}}


# --- errors ---------------------------------------------------------------------------------


def check_patch(body: Any, patch_type: str) -> None:
    """Refuse, before sending, a patch whose body cannot be of its type (a caller's bug)."""
    if patch_type not in PATCH_TYPES:
        raise ValueError(f"patch_type {patch_type!r} is not one of {', '.join(PATCH_TYPES)}")
    if (patch_type == JSON_PATCH) != isinstance(body, list):
        raise ValueError("a JSON Patch is a list of operations; merge patches are objects")

class KubeError(Exception):
    """A refused or failed request, with the API server's Status body when there was one."""

    temporary = False

    def __init__(self, status: int, body: Mapping | None = None, retry_after: float | None = None):
        body = dict(body or {})
        self.status = status
        self.reason = str(body.get("reason", ""))
        self.message = str(body.get("message", ""))
        self.body = body
        self.retry_after = retry_after
        super().__init__(f"{status} {self.reason}: {self.message}".strip())


class Conflict(KubeError):
    """The object changed since it was read (409, or a failed JSON Patch `test`): re-read, decide again."""


class AlreadyExists(Conflict):
    """A create found the name taken (409 AlreadyExists)."""


class Temporary(KubeError):
    """Worth retrying unchanged after a delay."""

    temporary = True


class Throttled(Temporary):
    """429: the API server asks us to slow down, usually with Retry-After."""


class ServerError(Temporary):
    """5xx, or no answer at all (status 0: connection refused, reset, timed out)."""


class Permanent(KubeError):
    """Retrying the same request will get the same answer."""


class NotFound(Permanent):
    pass


class Gone(Permanent):
    """410: the resourceVersion is older than the server keeps (watch) or a list continuation expired."""


class Invalid(Permanent):
    """422: the API's validation refused the change; `body.details.causes` names the fields."""


class Forbidden(Permanent):
    pass


class Rejected(Permanent):
    """Any other 4xx: a malformed request (400), bad credentials (401), unsupported patch type (415)."""


# The exact body a real kube-apiserver sends when a JSON Patch `test` operation fails
# (fixtures/kube-apiserver-v1.36/api/jsonpatch-test-stale-rv.json): 422 Invalid, this generic
# message and no causes. Validation failures always name a field in their causes.
FAILED_TEST_MESSAGE = "the server rejected our request due to an error in our request"


def is_failed_patch_test(status: int, body: Mapping | None) -> bool:
    body = body or {}
    causes = (body.get("details") or {}).get("causes")
    return (status == 422 and body.get("reason") == "Invalid" and body.get("message") == FAILED_TEST_MESSAGE
            and not causes)


def classify(status: int, body: Mapping | None) -> type[KubeError]:
    """The error class for an HTTP status and Status body (pure; status 0 means no answer)."""
    reason = (body or {}).get("reason")
    if status == 409:
        return AlreadyExists if reason == "AlreadyExists" else Conflict
    if status == 422:
        return Conflict if is_failed_patch_test(status, body) else Invalid
    if status == 429:
        return Throttled
    if status == 0 or status >= 500:
        return ServerError
    return {403: Forbidden, 404: NotFound, 410: Gone}.get(status, Rejected)


def retry_after_seconds(header: str | None, body: Mapping | None) -> float | None:
    """Retry-After in seconds from the header, else from the Status's `details.retryAfterSeconds`."""
    if header and header.strip().isdigit():
        return float(header.strip())
    seconds = ((body or {}).get("details") or {}).get("retryAfterSeconds")
    return float(seconds) if isinstance(seconds, int) and seconds >= 0 else None


def error_from(status: int, payload: bytes | Mapping | None, retry_after_header: str | None = None) -> KubeError:
    """The typed error for an answer; a body that is not a Status JSON becomes its message."""
    body: Mapping | None
    if isinstance(payload, Mapping):
        body = payload
    else:
        try:
            body = orjson.loads(payload) if payload else None
        except ValueError:
            body = None
        if not isinstance(body, Mapping):
            body = {"message": (payload or b"")[:512].decode("utf-8", "replace")}
    kind = classify(status, body)
    return kind(status, body, retry_after_seconds(retry_after_header, body))


# --- backoff --------------------------------------------------------------------------------

@dataclass
class Backoff:
    """Exponential delays with jitter, never above `cap`.

    The delay is drawn from [base × (1 − jitter), base] so that many clients failing together
    spread out, and the cap holds even at saturation.
    """

    initial: float = 0.8
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 0.5
    random: Callable[[], float] = random.random
    attempt: int = field(default=0, init=False)

    def next(self) -> float:
        base = min(self.cap, self.initial * self.factor ** min(self.attempt, 64))
        self.attempt += 1
        return base * (1 - self.jitter * self.random())

    def reset(self) -> None:
        self.attempt = 0


# --- watch stream ---------------------------------------------------------------------------

def split_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Whole lines from a stream cut anywhere: chunk boundaries do not follow event boundaries."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        yield from (line for line in lines if line.strip())
    if pending.strip():
        yield pending


def parse_watch_line(line: bytes, decode: Callable[[bytes], Any] = orjson.loads) -> tuple[str, dict]:
    """One watch event `{"type": ..., "object": {...}}` → (type, object); ValueError if it is not one."""
    event = decode(line)
    if not isinstance(event, dict) or not isinstance(event.get("type"), str) \
            or not isinstance(event.get("object"), dict):
        raise ValueError(f"not a watch event: {line[:200]!r}")
    return event["type"], event["object"]


class WatchStream:
    """The events of one watch request, read as they arrive.

    An `ERROR` event is raised as the typed error of the Status it carries (410 → `Gone`), and a
    broken stream as `ServerError`. `interrupt()` may be called from another thread to end a
    read that is blocked waiting for the next event. `decode` parses each event's line.
    """

    def __init__(self, response: Any, decode: Callable[[bytes], Any] = orjson.loads):
        self._response, self._decode = response, decode

    def __iter__(self) -> Iterator[tuple[str, dict]]:
        try:
            for line in split_lines(self._response.stream(amt=None, decode_content=True)):
                try:
                    kind, obj = parse_watch_line(line, self._decode)
                except ValueError as error:
                    raise _no_answer("BadWatchEvent", error) from error
                if kind == "ERROR":
                    raise error_from(int(obj.get("code") or 500), obj)
                yield kind, obj
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise _no_answer("WatchBroken", error) from error
        finally:
            self.close()

    def interrupt(self) -> None:
        """Wake a read blocked in another thread; that thread's iteration then ends."""
        self._response.shutdown()

    def close(self) -> None:
        """Drop the connection: a watch cut short cannot be reused for another request."""
        self._response.close()
        self._response.release_conn()


# --- the adapter ----------------------------------------------------------------------------

def load(kubeconfig: str | None = None, *, context: str | None = None, **options: Any) -> Kube:
    """A `Kube` from a kubeconfig file, else in-cluster credentials, else $KUBECONFIG / ~/.kube/config."""
    configuration = k8s_client.Configuration()
    if kubeconfig is None and k8s_config.incluster_config.SERVICE_HOST_ENV_NAME in os.environ:
        k8s_config.load_incluster_config(client_configuration=configuration)
    else:
        k8s_config.load_kube_config(config_file=kubeconfig, context=context,
                                    client_configuration=configuration, persist_config=False)
    # One connection per informer's watch plus writers; the default (5 × CPUs) discards connections.
    configuration.connection_pool_maxsize = 32
    # Retries and their delays are ours (`Kube._json`); urllib3 would otherwise sleep out a
    # Retry-After itself, unseen and uninterruptible. It may still reconnect once at once.
    configuration.retries = urllib3.Retry(total=1, read=0, status=0, other=0, redirect=0,
                                          respect_retry_after_header=False, raise_on_status=False)
    return Kube(k8s_client.ApiClient(configuration), **options)


class Kube:
    """Raw-JSON calls on an `ApiClient`. Temporary errors are retried `retries` times.

    Retrying writes is safe for the way gangkeeper writes: patches are guarded by
    resourceVersion or a `test` (a retry of an applied write gets a Conflict and the caller
    re-reads), deletes carry a UID precondition, created Events are disposable and a created
    Gang answers AlreadyExists.
    """

    def __init__(self, api_client: k8s_client.ApiClient, *, retries: int = 4, timeout: float = 30.0,
                 backoff: Callable[[], Backoff] = lambda: Backoff(initial=0.2, cap=10.0),
                 discovery_ttl: float = 60.0, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, page_size: int = 500):
        self._options = dict(retries=retries, timeout=timeout, backoff=backoff, discovery_ttl=discovery_ttl,
                             clock=clock, sleep=sleep, page_size=page_size)
        self.api_client = api_client
        self.retries, self.timeout, self.page_size = retries, timeout, page_size
        self._backoff, self._clock, self._sleep = backoff, clock, sleep
        self._discovery_ttl = discovery_ttl
        self._discovery: dict[tuple[str, str], tuple[frozenset[str], float]] = {}
        self._discovery_lock = threading.Lock()

    def with_options(self, **changes: Any) -> Kube:
        """The same connection with other options, e.g. no retries for the leader, which must not wait."""
        return Kube(self.api_client, **{**self._options, **changes})

    # reads

    def get(self, resource: Resource, namespace: str | None, name: str) -> dict:
        return self._json("GET", resource.path(namespace, name))

    def list(self, resource: Resource, namespace: str | None = None, label_selector: str = "",
             field_selector: str = "", *, transform: Callable[[dict], Any] | None = None,
             reading: Reading | None = None) -> tuple[list, str]:
        """All items and the list's resourceVersion, read in pages of `page_size`.

        With `transform`, each page is transformed as it arrives and None results are dropped:
        50,000 pods parsed at once would hold gigabytes of dicts, one page of them does not.
        With `reading`, only the fields of its shape are read of each item (controller.reading.shapes).
        When a continuation expires (410) between pages the list is read again in one request,
        as client-go's pager does, rather than failing forever on a busy cluster.
        """
        query = _selectors(label_selector, field_selector)
        try:
            return self._list_pages(resource, namespace, query, self.page_size, transform, reading)
        except Gone:
            log.info("list of %s: continuation expired, reading it in one request", resource.name)
            return self._list_pages(resource, namespace, query, 0, transform, reading)

    def _list_pages(self, resource: Resource, namespace: str | None, query: Query, limit: int,
                    transform: Callable[[dict], Any] | None, reading: Reading | None) -> tuple[Items, str]:
        items: Items = []
        token = ""
        decode = orjson.loads if reading is None else reading.page
        while True:
            page_query = query + ([("limit", limit)] if limit else []) + ([("continue", token)] if token else [])
            page = self._json("GET", resource.path(namespace), query=page_query, decode=decode)
            page_items = page.get("items") or ()
            if transform is None:
                items.extend(page_items)
            else:
                items.extend(kept for kept in map(transform, page_items) if kept is not None)
            metadata = page.get("metadata") or {}
            token = metadata.get("continue") or ""
            if not token:
                return items, str(metadata.get("resourceVersion", ""))

    def resource_versions(self, resource: Resource, namespace: str | None, label_selector: str) -> dict[str, str]:
        """The resourceVersion of each object the selector selects, by name, read now from the API
        server (not a cache): asked as metadata alone (a PartialObjectMetadataList), which every
        API server since 1.15 serves without the objects' specs and statuses."""
        page = self._json("GET", resource.path(namespace), query=_selectors(label_selector, ""), accept=METADATA_LIST)
        items = page.get("items") if isinstance(page, dict) else None
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            raise _no_answer("BadResponse", ValueError(f"a list of {resource.name} without its items"))
        return {str((item.get("metadata") or {}).get("name", "")): str((item.get("metadata") or {}).get(
            "resourceVersion", "")) for item in items}

    def watch(self, resource: Resource, resource_version: str, timeout_seconds: int, allow_bookmarks: bool = True,
              *, namespace: str | None = None, label_selector: str = "", field_selector: str = "",
              reading: Reading | None = None) -> WatchStream:
        """Changes after `resource_version`; the server ends the stream after `timeout_seconds`.
        With `reading`, only the fields of its shape are read of each object (controller.reading.shapes).

        Not retried here: the informer decides between watching again and relisting.
        """
        query = _selectors(label_selector, field_selector) + [
            ("watch", "true"), ("resourceVersion", resource_version), ("timeoutSeconds", int(timeout_seconds))]
        if allow_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        # The read timeout only catches a dead connection: the server closes the stream itself.
        response = self._send("GET", resource.path(namespace), query, None, None, (10, timeout_seconds + 30))
        return WatchStream(response, orjson.loads if reading is None else reading.event)

    def served(self, group: str, version: str, plural: str) -> bool:
        """Whether the API serves this resource, from discovery, re-read after `discovery_ttl`.

        The core group is always served. A group/version the server does not know answers 404
        (a CRD not installed yet), which is "not served"; other failures are raised.
        """
        if not group:
            return True
        key = (group, version)
        with self._discovery_lock:
            cached = self._discovery.get(key)
        if cached is None or self._clock() - cached[1] >= self._discovery_ttl:
            try:
                document = self._json("GET", f"/apis/{group}/{version}")
                plurals = frozenset(r.get("name", "") for r in document.get("resources") or ())
            except NotFound:
                plurals = frozenset()
            cached = (plurals, self._clock())
            with self._discovery_lock:
                self._discovery[key] = cached
        return plural in cached[0]

    def forget_discovery(self, group: str, version: str) -> None:
        """Drop what discovery said about a group/version (a request just got 404 for it)."""
        with self._discovery_lock:
            self._discovery.pop((group, version), None)

    # writes

    def create(self, resource: Resource, namespace: str | None, body: Mapping) -> dict:
        return self._json("POST", resource.path(namespace), body=body)

    def patch(self, resource: Resource, namespace: str | None, name: str, body: Any,
              patch_type: str = MERGE_PATCH, *, subresource: str = "") -> dict:
        """A narrow patch. A JSON Patch must be a list: the client would send anything else as a
        strategic merge patch, which custom resources refuse."""
        check_patch(body, patch_type)
        return self._json("PATCH", resource.path(namespace, name, subresource), body=body, content_type=patch_type)

    def patch_status(self, resource: Resource, namespace: str | None, name: str, body: Any,
                     patch_type: str = MERGE_PATCH) -> dict:
        return self.patch(resource, namespace, name, body, patch_type, subresource="status")

    def delete(self, resource: Resource, namespace: str | None, name: str, *, uid: str | None = None,
               resource_version: str | None = None) -> dict:
        """Delete, optionally only if the object still has this UID / resourceVersion (409 otherwise)."""
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": preconditions} if preconditions else None
        return self._json("DELETE", resource.path(namespace, name), body=body)

    def evict(self, namespace: str, name: str, uid: str) -> dict:
        """Ask the Eviction API to evict this very pod (`uid`): it honours the pod's
        PodDisruptionBudgets and writes its DisruptionTarget condition. Tried once: a budget's
        refusal (429) is an answer for the next pass to weigh, not a reason to wait here."""
        return self._exchange("POST", PODS.path(namespace, name) + "/eviction", [], eviction(namespace, name, uid), None)

    # transport

    def _json(self, method: str, path: str, *, query: Query | None = None, body: Any = None,
              content_type: str | None = None, decode: Callable[[bytes], dict] = orjson.loads,
              accept: str = JSON) -> dict:
        """One request, retried on temporary errors, answered as a parsed JSON object."""
        backoff = self._backoff()
        while True:
            try:
                return self._exchange(method, path, query or [], body, content_type, decode, accept)
            except Temporary as error:
                if backoff.attempt >= self.retries:
                    raise
                delay = backoff.next()
                delay = error.retry_after if error.retry_after is not None else delay
                log.info("%s %s: %s; retrying in %.1fs", method, path, error, delay)
                self._sleep(delay)

    def _exchange(self, method: str, path: str, query: Query, body: Any, content_type: str | None,
                  decode: Callable[[bytes], dict] = orjson.loads, accept: str = JSON) -> dict:
        response = self._send(method, path, query, body, content_type, self.timeout, accept)
        try:
            data = response.read()
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise _no_answer("ConnectionError", error) from error
        finally:
            response.release_conn()
        try:
            return decode(data) if data else {}
        except ValueError as error:  # a body cut short
            raise _no_answer("BadResponse", error) from error

    def _send(self, method: str, path: str, query: Query, body: Any, content_type: str | None,
              timeout: Any, accept: str = JSON) -> Any:
        """Send and return the unread urllib3 response of a 2xx answer; raise the typed error otherwise."""
        headers = {"Accept": accept}
        if content_type or body is not None:
            headers["Content-Type"] = content_type or "application/json"
        request = self.api_client.param_serialize(method=method, resource_path=path, query_params=query,
                                                  header_params=headers, body=body, auth_settings=["BearerToken"])
        try:
            response = self.api_client.call_api(*request, _request_timeout=timeout).response
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise _no_answer("ConnectionError", error) from error
        except k8s_client.ApiException as error:  # the client's own refusals (TLS failures: status 0)
            raise error_from(int(error.status or 0), (error.body or "").encode()) from error
        if 200 <= response.status < 300:
            return response
        try:
            payload = response.read()
        except (urllib3.exceptions.HTTPError, OSError):
            payload = b""
        finally:
            response.release_conn()
        raise error_from(response.status, payload, response.headers.get("Retry-After"))


def _no_answer(reason: str, error: Exception) -> ServerError:
    return ServerError(0, {"reason": reason, "message": str(error)})


def _selectors(label_selector: str, field_selector: str) -> Query:
    return [(k, v) for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if v]
