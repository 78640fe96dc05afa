"""The emulated API server over HTTP(S), for the official clients and kubectl.

Transport only: paths are parsed into a `Target`, the request is handed to `APIServer`, and the
answer (object, list, Status or watch stream) is written back the way the real server frames it.
Every request is answered: refusals as their Status, anything unexpected as a logged 500.

What kubectl needs of a real server is here too: protobuf request bodies read (`sim.protobuf`;
answers are JSON, which every client accepts after protobuf), Table answers for `kubectl get`
(`sim.tables`), the OpenAPI v3 documents and `fieldValidation` (`sim.openapi`), and watch-list
(`sendInitialEvents=true`: the current objects as ADDED, then the bookmark that ends them).
"""

from __future__ import annotations

import base64
import json
import logging
import socket
import ssl
import threading
import time
import urllib.parse
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import NamedTuple

from sim import discovery, openapi, protobuf, rbac, tables
from sim.api import APIError, User
from sim.apiserver import APIServer
from sim.auth import Authenticator
from sim.faults import Faults
from sim.kinds import Kind, Registry
from sim.patching import JSON_PATCH
from sim.rbac import Authorizer, refusal, request_from_http, watching
from sim.selectors import matches, parse_fields, parse_labels
from sim.status import FieldError, bad_request, internal, invalid, method_not_allowed, page_not_found, status
from sim.store import to_json

log = logging.getLogger(__name__)

_MAX_BODY = 3 * 1024 * 1024
_DEFAULT_WATCH_SECONDS = 1800
_BOOKMARK_SECONDS = 5.0
INITIAL_EVENTS_END = "k8s.io/initial-events-end"  # the annotation of the bookmark that ends a watch-list's ADDED
_EVENT_LINES_KEPT = 256  # the latest watch events' encodings shared by the watchers writing them
_LIST_OPTIONS = Kind("meta.k8s.io", "v1", "ListOptions", "", False)
_SERVED_MEDIA = ("application/json", "application/*", "*/*")
REQUESTS_KEPT = 10_000


@dataclass(frozen=True, order=True)
class Decision:
    """One kind of request the authorizer decided on: who, which verb, on what (`sim.rbac.Request.target`)."""

    username: str
    verb: str
    target: str
    allowed: bool


class Arrival(NamedTuple):
    """One request as it arrived: its verb as RBAC names it (`list`, `watch`, `patch`, ...), its path and query."""

    verb: str
    path: str
    query: dict[str, str]


@dataclass(frozen=True)
class Target:
    """What a resource path names."""

    kind: Kind
    namespace: str | None = None
    name: str = ""
    subresource: str = ""


def parse_path(registry: Registry, path: str) -> Target:
    """`/api/v1/namespaces/NS/pods/NAME/status` and friends; an unserved path is the real 404."""
    parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
    if parts[0] == "api" and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis" and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise page_not_found()
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces" and registry.by_path(group, version, rest[2]):
        namespace, rest = rest[1], rest[2:]
    kind = registry.by_path(group, version, rest[0])
    if kind is None or len(rest) > 3 or (namespace is not None and not kind.namespaced):
        raise page_not_found()
    subresource = rest[2] if len(rest) == 3 else ""
    if subresource and subresource not in kind.subresources:
        raise page_not_found()
    return Target(kind, namespace, rest[1] if len(rest) > 1 else "", subresource)


_TYPE_FIELDS = ("apiVersion", "kind")


def _list_kind(kind: Kind) -> str:
    return f"{kind.kind}List"


def _continue_token(rv: int, key: tuple[str, str]) -> str:
    return base64.urlsafe_b64encode(json.dumps({"rv": rv, "start": list(key)}).encode()).decode()


def _page(items: list[dict], rv: int, limit: int, token: str) -> tuple[list[dict], dict]:
    """One page of a list (`limit`, `continue`); pages follow keys, not a snapshot of the first page."""
    if token:
        try:
            start = tuple(json.loads(base64.urlsafe_b64decode(token))["start"])
        except (ValueError, KeyError, TypeError):
            raise bad_request("continue key is not valid: incorrect encoded start resourceVersion") from None
        items = [o for o in items if (o["metadata"].get("namespace", ""), o["metadata"]["name"]) > start]
    meta: dict = {"resourceVersion": str(rv)}
    if limit and len(items) > limit:
        last = items[limit - 1]["metadata"]
        meta["continue"] = _continue_token(rv, (last.get("namespace", ""), last["name"]))
        meta["remainingItemCount"] = len(items) - limit
        items = items[:limit]
    return items, meta


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - signature fixed by the base class
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self):
        self._handle("GET")

    def do_POST(self):
        self._handle("POST")

    def do_PUT(self):
        self._handle("PUT")

    def do_PATCH(self):
        self._handle("PATCH")

    def do_DELETE(self):
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        url = urllib.parse.urlsplit(self.path)
        self.query = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query).items()}
        self.warnings: list[str] = []
        try:
            # Read the whole body before any answer: an early refusal (404, 401) that left it
            # unread would make the next request on this kept-alive connection start mid-body.
            self.raw_body = self._read_body()
            user = self.server.auth.user(self.headers.get("Authorization"))
            request = request_from_http(user, method, url.path, self.query)
            self.server.requests.append(Arrival(request.verb, url.path, dict(self.query)))
            self.server.authorize(request, method)
            answer = self.server.faults.scripted(request.verb, url.path)
            if answer is not None:
                self._send(answer.code, answer.body, dict(answer.headers))
                return
            error = self.server.faults.injected_error(method)
            if error is not None:
                raise error
            self._dispatch(method, url.path, user)
        except APIError as e:
            self._send(e.code, e.status)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLEOFError):
            pass  # the client went away (over TLS, without a goodbye: `kubectl get -w` stopped with Ctrl-C)
        except Exception:
            log.exception("internal error answering %s %s", method, self.path)
            self._send(500, internal("unexpected error in the emulated API server").status)

    def _dispatch(self, method: str, path: str, user: User) -> None:
        document = self._discovery(path) if method == "GET" else None
        if document is None and method == "GET" and path.startswith("/openapi/"):
            document = self._openapi(path)
        if document is not None:  # a group or version not served answers its Status with its code (404)
            self._send(document.get("code", 200) if document.get("kind") == "Status" else 200, document)
            return
        target = parse_path(self.server.api.kinds, path)
        self._check_accept()
        if target.subresource == "eviction":
            if method != "POST":
                raise method_not_allowed(method.lower())
            self._send(201, self.server.api.create_eviction(target.namespace or "", target.name, self._body(), user=user,
                                                            **self._write_options("CREATE")))
        elif method == "GET" and not target.name:
            self._watch(target) if watching(self.query) else self._list(target)
        elif method == "GET":
            obj = self.server.api.get(self.server.api.resource_name(target.kind), target.name,
                                      namespace=target.namespace)
            version = tables.wanted_table(self.headers.get("Accept", ""))
            self._send(200, self._table(target.kind, [obj], version, obj["metadata"]) if version else obj)
        elif method == "POST" and (target.subresource == "binding" or target.kind.plural == "bindings"):
            binding = self._body()
            name = target.name or (binding.get("metadata") or {}).get("name", "")
            self._send(201, self.server.api.create_binding(target.namespace or "", name, binding, user=user,
                                                           warnings=self.warnings))
        elif target.kind.plural == "bindings":
            raise method_not_allowed(method.lower())
        elif method == "POST" and not target.name:
            body = self._body()
            self._check_fields(target, body)
            self._send(201, self.server.api.create(self._resource(target), body, namespace=target.namespace,
                                                   user=user, **self._write_options("CREATE")))
        elif method == "PUT" and target.name:
            self._send(200, self._put(target, user))
        elif method == "PATCH" and target.name:
            body, patch_type = self._body(), self.headers.get("Content-Type", "")
            if not patch_type.startswith(JSON_PATCH):
                self._check_fields(target, _without_directives(body))
            self._send(200, self.server.api.patch(
                self._resource(target), target.name, body, namespace=target.namespace,
                patch_type=patch_type, subresource=target.subresource, user=user,
                **self._write_options("UPDATE")))
        elif method == "DELETE" and target.name:
            self._delete(target, user)
        else:
            raise method_not_allowed(method.lower())

    def _resource(self, target: Target) -> str:
        return self.server.api.resource_name(target.kind)

    def _discovery(self, path: str) -> dict | None:
        registry, parts = self.server.api.kinds, path.strip("/").split("/")
        if path.rstrip("/") == "/version":
            return discovery.VERSION
        if parts == ["api"]:
            return discovery.api_versions(f"{self.server.server_address[0]}:{self.server.server_address[1]}")
        if parts == ["apis"]:
            return discovery.api_group_list(registry)
        if parts[:1] == ["api"] and len(parts) == 2:
            return discovery.resource_list(registry, "", parts[1]) or page_not_found().status
        if parts[:1] == ["apis"] and len(parts) == 2:
            return discovery.api_group(registry, parts[1]) or page_not_found().status
        if parts[:1] == ["apis"] and len(parts) == 3:
            return discovery.resource_list(registry, parts[1], parts[2]) or page_not_found().status
        if parts[0] in ("healthz", "readyz", "livez"):
            return {"status": "ok"}
        return None

    def _openapi(self, path: str) -> dict:
        """`/openapi/v3` and its group-version documents; v2 (protobuf only, for kubectl) is not served."""
        if not path.startswith("/openapi/v3"):
            return page_not_found().status
        try:
            documents = self.server.documents()
            found = documents.index() if path.rstrip("/") == "/openapi/v3" else \
                documents.group_version(path.removeprefix("/openapi/v3/").strip("/"))
        except ImportError as missing:  # an install without the harness's kubernetes-validate
            log.warning("no OpenAPI documents: %s", missing)
            return page_not_found().status
        return found if found is not None else page_not_found().status

    def _check_accept(self) -> None:
        """406 when the client takes neither JSON nor a Table (protobuf alone): answers are JSON only."""
        accept = self.headers.get("Accept", "")
        if not accept or tables.wanted_table(accept):
            return
        if any(media.split(";")[0].strip().lower() in _SERVED_MEDIA for media in accept.split(",")):
            return
        raise APIError(status(406, "NotAcceptable", "only the following media types are accepted: application/json"))

    def _check_fields(self, target: Target, obj) -> None:
        """`fieldValidation`: Strict refuses fields the kind's schema does not declare, Warn names them."""
        directive = self.query.get("fieldValidation", "")
        if directive not in ("Strict", "Warn") or not isinstance(obj, dict):
            return
        try:
            unknown = self.server.documents().unknown_fields(target.kind, obj)
        except ImportError:
            return
        words = [f'unknown field "{path}"' for path in unknown]
        if words and directive == "Warn":
            self.warnings.extend(words)
        elif words:
            kind = target.kind
            raise bad_request(f'{kind.kind} in version "{kind.version}" cannot be handled as a {kind.kind}: strict '
                              f'decoding error: {", ".join(words)}')

    def _table(self, kind: Kind, objects: list[dict], version: str, meta: dict, headers: bool = True) -> dict:
        version_entry = openapi.crd_version(self.server.crds(), kind) if not kind.strategic_merge else None
        return tables.table(kind, objects, self.server.api.clock(), version=version,
                            printer_columns=(version_entry or {}).get("additionalPrinterColumns"),
                            include_object=self.query.get("includeObject", "Metadata"), headers=headers,
                            meta={k: v for k, v in meta.items() if k in ("resourceVersion", "continue",
                                                                          "remainingItemCount")})

    def _write_options(self, operation: str) -> dict:
        options = {k: self.query[k] for k in ("fieldManager", "fieldValidation") if k in self.query}
        return {"dry_run": self.query.get("dryRun") == "All", "options": options, "warnings": self.warnings}

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_BODY:
            self.close_connection = True  # the unread body must not be taken for the next request
            raise APIError({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": "the request body is too large", "reason": "RequestEntityTooLarge",
                            "code": 413})
        return self.rfile.read(length) if length else b""

    def _body(self):
        raw = self.raw_body
        if raw and self.headers.get("Content-Type", "").split(";")[0].strip() == protobuf.CONTENT_TYPE:
            return protobuf.decode(raw)
        try:
            return json.loads(raw) if raw else {}
        except ValueError as e:
            raise bad_request(f"couldn't get version/kind; json parse error: {e}") from None

    def _put(self, target: Target, user: User) -> dict:
        body = self._body()
        self._check_fields(target, body)
        name = (body.get("metadata") or {}).get("name")
        if name != target.name:
            raise bad_request(f"the name of the object ({name}) does not match the name on the URL ({target.name})")
        return self.server.api.update(self._resource(target), body, namespace=target.namespace,
                                      subresource=target.subresource, user=user, **self._write_options("UPDATE"))

    def _delete(self, target: Target, user: User) -> None:
        body = self._body() if int(self.headers.get("Content-Length") or 0) else {}
        grace = self.query.get("gracePeriodSeconds", body.get("gracePeriodSeconds"))
        deleted = self.server.api.delete(
            self._resource(target), target.name, namespace=target.namespace, user=user,
            grace_period_seconds=None if grace is None else int(grace),
            propagation_policy=self.query.get("propagationPolicy", body.get("propagationPolicy")),
            preconditions=body.get("preconditions"), dry_run=self.query.get("dryRun") == "All",
            warnings=self.warnings)
        pending = deleted["metadata"].get("deletionTimestamp") and "resourceVersion" in deleted["metadata"] and \
            self._still_there(target)
        self._send(202 if pending else 200, deleted)

    def _still_there(self, target: Target) -> bool:
        try:
            self.server.api.get(self._resource(target), target.name, namespace=target.namespace)
            return True
        except APIError:
            return False

    def _list(self, target: Target) -> None:
        objects, rv = self.server.api.select(target.kind, target.namespace, self.query.get("labelSelector", ""),
                                             self.query.get("fieldSelector", ""))
        items, meta = _page(objects, rv, int(self.query.get("limit") or 0), self.query.get("continue", ""))
        version = tables.wanted_table(self.headers.get("Accept", ""))
        if version:
            self._send(200, self._table(target.kind, items, version, meta))
            return
        if tables.wanted_metadata(self.headers.get("Accept", "")):
            self._send(200, tables.metadata_list(items, meta))
            return
        if target.kind.strategic_merge:
            # A built-in kind's list items carry no apiVersion or kind on a real server (only the
            # list does); custom resources' items carry both.
            items = [{key: value for key, value in item.items() if key not in _TYPE_FIELDS} for item in items]
        self._send(200, {"kind": _list_kind(target.kind), "apiVersion": target.kind.api_version, "metadata": meta,
                         "items": items})

    def _watch(self, target: Target) -> None:
        """Chunked JSON lines, one event each, until timeoutSeconds; 410 Gone arrives as an ERROR event.

        A watch-list (`sendInitialEvents=true`, `resourceVersionMatch=NotOlderThan`) starts with
        every selected object as ADDED whatever resourceVersion it names (the store is never
        behind one it handed out), then, when bookmarks are allowed, the bookmark annotated
        `k8s.io/initial-events-end` at the resourceVersion of that state: how client-go's
        reflector and `kubectl delete`'s and `kubectl wait`'s watches know the list is over."""
        api, faults = self.server.api, self.server.faults
        selected = watch_filter(target, self.query.get("labelSelector", ""), self.query.get("fieldSelector", ""))
        requested = self.query.get("resourceVersion", "")
        initial_events = _watch_list(self.query)
        deadline = time.monotonic() + int(self.query.get("timeoutSeconds") or _DEFAULT_WATCH_SECONDS)
        self._table_version = tables.wanted_table(self.headers.get("Accept", ""))
        try:
            if requested not in ("", "0") and faults.force_gone and not initial_events:
                faults.count("410")
                raise APIError(_gone(requested, api.store.resource_version))
            watcher, initial, rv = self._open_watch(target, requested, selected, initial_events)
        except APIError as e:
            self._start_stream()
            self._write_event({"type": "ERROR", "object": e.status})
            self._end_stream()
            return
        try:
            self._start_stream()  # once watching: a change made after the client has the headers is in the stream
            for obj in initial:
                self._write_event({"type": "ADDED", "object": obj}, target.kind)
            if initial_events and self.query.get("allowWatchBookmarks") in ("1", "true"):
                self._write_event(_bookmark(target.kind, rv, initial_events_end=True))
            with faults.streaming(target.kind, watcher):
                ended = self._follow(target, watcher, selected, rv, deadline, faults.cut_watch_after)
        finally:
            api.store.stop_watch(watcher)
        if ended == "cut":
            faults.count("watch-cut")
        elif ended == "dropped":
            return
        self._end_stream()

    def _open_watch(self, target: Target, requested: str, selected, initial_events: bool | None):
        """The watcher, the objects to send first as ADDED and the resourceVersion they stand at:
        the current objects when watching from "now" (no or zero resourceVersion, unless
        `sendInitialEvents=false`) or when a watch-list asks for them, else none."""
        api = self.server.api
        if requested not in ("", "0"):
            try:
                since = int(requested)
            except ValueError:
                raise bad_request(f"invalid resource version: {requested}") from None
            if not initial_events:
                return api.watch(target.kind, since), [], since
        if initial_events is False:
            with api.store.lock:
                rv = api.store.resource_version
                return api.watch(target.kind, rv), [], rv
        with api.store.lock:
            objects, rv = api.select(target.kind, target.namespace)
            return api.watch(target.kind, rv), [o for o in objects if selected(o)], rv

    def _follow(self, target: Target, watcher, selected, since: int, deadline: float, cut_after: int | None) -> str:
        """Stream events until the deadline (`timeout`), the stream is cut after `cut_after` events
        (`cut`), or a scripted act ends it (`expired`: its ERROR event sent, `dropped`: the
        connection gone). Scripted acts wait for the events already due."""
        sent, bookmarked = 0, 0
        bookmarks = self.query.get("allowWatchBookmarks") in ("1", "true")
        faults = self.server.faults
        while time.monotonic() < deadline and (cut_after is None or sent < cut_after):
            idle = min(_BOOKMARK_SECONDS, max(deadline - time.monotonic(), 0.01))
            change = watcher.next(timeout=0.0 if faults.has_act(target.kind) else idle)
            if change is None:
                latest = self.server.api.store.resource_version
                act = faults.next_act(target.kind)
                if act == "expire":
                    self._write_event({"type": "ERROR", "object": _gone(str(since), latest)})
                    return "expired"
                if act == "cut":
                    self._drop_mid_chunk()
                    return "dropped"
                if bookmarks and (act == "bookmark" or latest != bookmarked):
                    self._write_event(_bookmark(target.kind, latest))
                    bookmarked = since = latest
                continue
            since = change.rv
            shown = _visible_type(change, selected)
            if shown is None:
                continue
            if self._table_version:
                self._write_event({"type": shown, "object": change.object}, target.kind)
            else:
                self._write_line(self.server.event_lines.line(change, shown))
            sent += 1
        return "cut" if cut_after is not None and sent >= cut_after else "timeout"

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()

    def _write_event(self, event: dict, kind: Kind | None = None) -> None:
        """One event; an object event as a one-row Table when the watch asked for Tables (headers once)."""
        if kind is not None and getattr(self, "_table_version", None):
            headers = not getattr(self, "_table_headers_sent", False)
            self._table_headers_sent = True
            event = {"type": event["type"], "object": self._table(kind, [event["object"]], self._table_version,
                                                                 event["object"]["metadata"], headers)}
        self._write_line(to_json(event) + b"\n")

    def _write_line(self, line: bytes) -> None:
        """One chunk of the stream, sent at once."""
        self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
        self.wfile.flush()

    def _drop_mid_chunk(self) -> None:
        """The connection lost in the middle of a chunk, as when a proxy or the network drops it."""
        self.wfile.write(b'400\r\n{"type":"MODI')
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True

    def _send(self, code: int, body: dict | None, headers: dict[str, str] | None = None) -> None:
        payload = b"" if body is None else to_json(body)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "no-cache, private")
        retry_after = ((body or {}).get("details") or {}).get("retryAfterSeconds")
        if retry_after and "Retry-After" not in (headers or {}):
            self.send_header("Retry-After", str(retry_after))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        for warning in self.warnings:
            self.send_header("Warning", f'299 - "{warning}"')
        self.end_headers()
        self.wfile.write(payload)


class _EventLines:
    """The JSON lines of the latest watch events, by change and the event type shown (a selector
    can show a MODIFIED as ADDED or DELETED): encoded by the first watcher that writes one, the
    same bytes for the others, which write it at about the same time. Safe to share because a
    stored object is never changed; only the latest `kept` are held, not the store's history."""

    def __init__(self, kept: int = _EVENT_LINES_KEPT):
        self._lines: OrderedDict[tuple[int, str], bytes] = OrderedDict()
        self._kept = kept
        self._lock = threading.Lock()

    def line(self, change, shown: str) -> bytes:
        key = (change.rv, shown)  # a resourceVersion is one change of one store
        with self._lock:
            line = self._lines.get(key)
        if line is None:
            line = to_json({"type": shown, "object": change.object}) + b"\n"
            with self._lock:
                self._lines[key] = line
                if len(self._lines) > self._kept:
                    self._lines.popitem(last=False)
        return line


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, api: APIServer, auth: Authenticator, faults: Faults, authorizer: Authorizer | None):
        super().__init__(address, _Handler)
        self.api, self.auth, self.faults, self.authorizer = api, auth, faults, authorizer
        self._decisions: Counter[Decision] = Counter()
        self._decisions_lock = threading.Lock()
        self._crd_files: list[dict] | None = None
        self._documents: tuple[tuple, openapi.Documents] | None = None
        self._documents_lock = threading.Lock()
        self.event_lines = _EventLines()
        self.requests: deque[Arrival] = deque(maxlen=REQUESTS_KEPT)  # the latest, oldest first

    def crds(self) -> list[dict]:
        """The CRDs custom resources are described by: stored ones when CRDs are served, else deploy/base's."""
        kind = self.api.kinds.by_name("customresourcedefinitions")
        if kind is not None:
            return self.api.store.list(kind)
        if self._crd_files is None:
            self._crd_files = openapi.custom_resource_definitions()
        return self._crd_files

    def documents(self) -> openapi.Documents:
        """The OpenAPI documents, built again when the CRDs they describe changed."""
        crds = self.crds()
        fingerprint = tuple((c["metadata"].get("name"), c["metadata"].get("resourceVersion")) for c in crds)
        with self._documents_lock:
            if self._documents is None or self._documents[0] != fingerprint:
                self._documents = (fingerprint, openapi.Documents(self.api.kinds, crds))
            return self._documents[1]

    def authorize(self, request: rbac.Request, method: str) -> None:
        """Refuse with the real 403 what the authorizer does not allow; without one, allow everything.

        Decided before any fault is drawn: a refused request is refused every time, and never uses
        up an injected fault meant for the requests that get through."""
        if self.authorizer is None:
            return
        allowed = self.authorizer.allows(request)
        with self._decisions_lock:
            self._decisions[Decision(request.user.username, request.verb, request.target, allowed)] += 1
        if not allowed:
            error = refusal(request)
            log.info("403 %s %s: %s", method, request.path, error.status["message"])
            raise error

    def decisions(self) -> Counter[Decision]:
        with self._decisions_lock:
            return Counter(self._decisions)

    def get_request(self):
        """Answers go out at once: without TCP_NODELAY, Nagle's algorithm and the client's delayed
        ACK hold every small response back about 40 ms."""
        connection, address = super().get_request()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection, address


class RunningServer:
    """An API server listening on 127.0.0.1 in a background thread.

    With an `authorizer` (sim.rbac), requests it does not allow are refused with 403 and every
    decision is counted in `decisions`; without one, every authenticated request is allowed."""

    def __init__(self, api: APIServer, *, port: int = 0, tokens: dict[str, User] | None = None,
                 certfile: str | None = None, keyfile: str | None = None, faults: Faults | None = None,
                 authorizer: Authorizer | None = None):
        self.api, self.faults = api, faults or Faults()
        self._http = _Server(("127.0.0.1", port), api, Authenticator(tokens), self.faults, authorizer)
        scheme = "http"
        if certfile:
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(certfile, keyfile)
            self._http.socket = context.wrap_socket(self._http.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self._http.server_address[1]}"
        # Polled for shutdown every 50 ms, not the default 500: a test stops a server each time it starts one.
        self._thread = threading.Thread(target=self._http.serve_forever, args=(0.05,), name="sim-apiserver",
                                        daemon=True)
        self._thread.start()

    @property
    def requests(self) -> list[Arrival]:
        """The latest requests (up to `REQUESTS_KEPT`), oldest first, each as it arrived."""
        return list(self._http.requests)

    @property
    def decisions(self) -> Counter[Decision]:
        """How many requests of each (user, verb, target) were allowed, and how many refused."""
        return self._http.decisions()

    def refused(self) -> list[Decision]:
        """The (user, verb, target) of every kind of request refused so far."""
        return sorted(decision for decision in self.decisions if not decision.allowed)

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _gone(requested: str, current: int) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"too old resource version: {requested} ({current})", "reason": "Expired", "code": 410}


def _bookmark(kind: Kind, rv: int, initial_events_end: bool = False) -> dict:
    meta: dict = {"resourceVersion": str(rv)}
    if initial_events_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    return {"type": "BOOKMARK", "object": {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": meta}}


def _watch_list(query: dict[str, str]) -> bool | None:
    """`sendInitialEvents` (None when not given), refused as the real server's ListOptions validation does."""
    asked, match = query.get("sendInitialEvents"), query.get("resourceVersionMatch", "")
    errors = []
    if asked is not None and match != "NotOlderThan":
        errors.append(FieldError("resourceVersionMatch", "Forbidden",
                                 "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"))
    if match and asked is None:
        errors.append(FieldError("resourceVersionMatch", "Forbidden",
                                 "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"))
    elif match and match != "NotOlderThan":
        errors.append(FieldError("resourceVersionMatch", "NotSupported", '"NotOlderThan"', match))
    if errors:
        raise invalid(_LIST_OPTIONS, "", errors)
    return None if asked is None else asked in ("1", "true")


def _without_directives(patch):
    """A merge or strategic merge patch without its `$patch`, `$setElementOrder/…` directives."""
    if isinstance(patch, dict):
        return {k: _without_directives(v) for k, v in patch.items() if not k.startswith("$")}
    if isinstance(patch, list):
        return [_without_directives(v) for v in patch]
    return patch


def _visible_type(change, selected) -> str | None:
    """The event type a selector-filtered watch shows: leaving the selection is DELETED, entering it ADDED."""
    now_in, was_in = selected(change.object), selected(change.old) if change.type != "ADDED" else False
    if change.type == "DELETED":
        return "DELETED" if was_in or now_in else None
    if now_in and was_in:
        return "MODIFIED"
    if now_in:
        return "ADDED"
    if was_in:
        return "DELETED"
    return None


def watch_filter(target: Target, label_selector: str, field_selector: str):
    """Whether an object is in the watched set: namespace, labels and fields."""
    labels = parse_labels(label_selector)
    fields = parse_fields(field_selector, target.kind, label_selector)

    def selected(obj: dict | None) -> bool:
        if obj is None:
            return False
        meta = obj["metadata"]
        if target.namespace and meta.get("namespace") != target.namespace:
            return False
        if target.name and meta.get("name") != target.name:
            return False
        return matches(labels, meta.get("labels")) and all(f.matches(obj) for f in fields)
    return selected

