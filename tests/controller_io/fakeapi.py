"""A tiny Kubernetes API over real HTTP, for testing the controller's I/O edge with the real client.

It serves what the adapter uses — discovery, list (with pages), chunked watch streams, get,
create, merge patch guarded by resourceVersion, delete with preconditions — with the status
codes and Status bodies of a real kube-apiserver. On top of that, tests script failures:
`inject` answers the next matching request with any status, body and headers (method `WATCH`
matches watch requests), `bookmark`/`expire`/`cut` act on the next or current watch stream,
and `compact` forgets history so that a watch from an old resourceVersion gets 410.

Deliberately small: the full emulation is `sim/`; these tests will run against it as well.
"""

import copy
import json
import socket
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from sim.patching import apply_merge_patch

CORE = {("", "v1"): {"pods": ("Pod", True), "nodes": ("Node", False), "namespaces": ("Namespace", False),
                     "events": ("Event", True)},
        ("coordination.k8s.io", "v1"): {"leases": ("Lease", True)}}


def gvp(resource) -> tuple[str, str, str]:
    """(group, version, plural) of a tuple or of anything with those attributes."""
    if isinstance(resource, tuple):
        return resource
    return resource.group, resource.version, resource.plural


def status(code: int, reason: str, message: str, **details) -> dict:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}
    if details:
        body["details"] = details
    return body


@dataclass
class Event:
    rv: int
    resource: tuple[str, str, str]
    type: str
    object: dict


class FakeAPI:
    def __init__(self):
        self.served = {key: dict(value) for key, value in CORE.items()}
        self.objects: dict[tuple, dict[tuple[str, str], dict]] = defaultdict(dict)
        self.history: list[Event] = []
        self.rv = 100
        self.compacted = 0
        self.injected: list[tuple[str, str, int, object, dict]] = []
        self.controls: dict[tuple, list[str]] = defaultdict(list)
        self.requests: list[tuple[str, str, dict]] = []
        self.cond = threading.Condition()
        self.stopping = False
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def kubeconfig(self, path) -> str:
        path.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}]}))
        return str(path)

    def start(self) -> "FakeAPI":
        self.thread.start()
        return self

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.server.shutdown()
        self.server.server_close()

    # --- test controls ---------------------------------------------------------------------

    def serve(self, group: str, version: str, plural: str, kind: str, namespaced: bool = True) -> None:
        with self.cond:
            self.served.setdefault((group, version), {})[plural] = (kind, namespaced)

    def unserve(self, group: str, version: str) -> None:
        """The group-version is gone: discovery and every request under it answer 404."""
        with self.cond:
            self.served.pop((group, version), None)
            self.cond.notify_all()

    def inject(self, method: str, path: str, code: int, body=None, headers=None) -> None:
        with self.cond:
            self.injected.append((method, path, code, body, headers or {}))

    def bookmark(self, resource) -> None:
        self._control(resource, "bookmark")

    def expire(self, resource) -> None:
        """The watch stream ends with an ERROR event carrying 410, as when etcd compacted."""
        self._control(resource, "expire")

    def cut(self, resource) -> None:
        """The connection drops in the middle of a chunk."""
        self._control(resource, "cut")

    def compact(self) -> None:
        with self.cond:
            self.compacted = self.rv
            self.history.clear()

    def put(self, resource, obj: dict, *, event: bool = True) -> dict:
        """Create or replace an object as another client would; `event=False` changes it unseen."""
        with self.cond:
            key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            kind = "MODIFIED" if key in self.objects[gvp(resource)] else "ADDED"
            return self._commit(gvp(resource), key, copy.deepcopy(obj), kind, event)

    def remove(self, resource, namespace: str, name: str, *, event: bool = True) -> None:
        with self.cond:
            obj = self.objects[gvp(resource)].pop((namespace, name))
            self._commit(gvp(resource), (namespace, name), obj, "DELETED", event)

    def _control(self, resource, action: str) -> None:
        with self.cond:
            self.controls[gvp(resource)].append(action)
            self.cond.notify_all()

    def _commit(self, resource, key, obj, kind, event) -> dict:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        obj["metadata"].setdefault("uid", str(uuid.uuid4()))
        if kind != "DELETED":
            self.objects[resource][key] = obj
        if event:
            self.history.append(Event(self.rv, resource, kind, copy.deepcopy(obj)))
        else:
            self.compacted = self.rv  # a change nobody saw: older versions cannot be resumed from
        self.cond.notify_all()
        return copy.deepcopy(obj)


def _parse_path(path: str):
    """→ (group, version, namespace, plural, name, subresource), or None for discovery paths."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"]:
        group, version, rest = "", parts[1], parts[2:]
    else:
        group, version, rest = parts[1], parts[2], parts[3:]
    if not rest:
        return group, version, None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    return group, version, (namespace, rest[0], rest[1] if len(rest) > 1 else "", rest[2] if len(rest) > 2 else "")


def _handler(api: FakeAPI):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        wbufsize = -1  # headers and body in one segment: no Nagle / delayed-ACK stall per request

        def log_message(self, *args):
            pass

        def do_GET(self):
            self._route("GET")

        def do_POST(self):
            self._route("POST")

        def do_PATCH(self):
            self._route("PATCH")

        def do_DELETE(self):
            self._route("DELETE")

        def _route(self, method):
            url = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            if method == "GET" and query.get("watch") in ("true", "1"):
                method = "WATCH"
            with api.cond:
                api.requests.append((method, url.path, query))
                injected = next((i for i in api.injected if i[:2] == (method, url.path)), None)
                if injected:
                    api.injected.remove(injected)
            if injected:
                return self._send(injected[2], injected[3], injected[4])
            group, version, target = _parse_path(url.path)
            kinds = api.served.get((group, version))
            if kinds is None or (target and target[1] not in kinds):
                return self._send(404, status(404, "NotFound", "the server could not find the requested resource"))
            if target is None:
                return self._send(200, {"kind": "APIResourceList", "groupVersion": f"{group}/{version}".lstrip("/"),
                                        "resources": [{"name": p, "kind": k, "namespaced": n}
                                                      for p, (k, n) in kinds.items()]})
            namespace, plural, name, _ = target
            resource = (group, version, plural)
            if method == "WATCH":
                return self._watch(resource, namespace, query)
            handler = {("GET", False): self._list, ("GET", True): self._get, ("POST", False): self._create,
                       ("PATCH", True): self._patch, ("DELETE", True): self._delete}.get((method, bool(name)))
            if handler is None:
                return self._send(405, status(405, "MethodNotAllowed", "the server does not allow this method"))
            with api.cond:
                code, answer = handler(resource, namespace, name, query, body)
            self._send(code, answer)

        def _list(self, resource, namespace, name, query, body):
            selector = dict(term.split("=", 1) for term in query.get("labelSelector", "").split(",") if term)
            items = [obj for (ns, _), obj in sorted(api.objects[resource].items())
                     if (not namespace or ns == namespace)
                     and all((obj["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())]
            start = int(query.get("continue") or 0)
            limit = int(query.get("limit") or 0) or len(items) or 1
            metadata = {"resourceVersion": str(api.rv)}
            if start + limit < len(items):
                metadata["continue"] = str(start + limit)
            page = copy.deepcopy(items[start:start + limit])
            return 200, {"kind": "List", "apiVersion": "v1", "metadata": metadata, "items": page}

        def _get(self, resource, namespace, name, query, body):
            obj = api.objects[resource].get((namespace, name))
            if obj is None:
                return 404, status(404, "NotFound", f'{resource[2]} "{name}" not found', name=name, kind=resource[2])
            return 200, copy.deepcopy(obj)

        def _create(self, resource, namespace, name, query, body):
            name = body["metadata"]["name"]
            if (namespace, name) in api.objects[resource]:
                return 409, status(409, "AlreadyExists", f'{resource[2]} "{name}" already exists',
                                   name=name, kind=resource[2])
            if namespace:
                body["metadata"]["namespace"] = namespace
            return 201, api._commit(resource, (namespace, name), body, "ADDED", True)

        def _patch(self, resource, namespace, name, query, body):
            code, current = self._get(resource, namespace, name, query, body)
            if code != 200:
                return code, current
            expected = (body.get("metadata") or {}).get("resourceVersion")
            if expected and expected != current["metadata"]["resourceVersion"]:
                return 409, status(409, "Conflict", f'Operation cannot be fulfilled on {resource[2]} "{name}": the '
                                   "object has been modified; please apply your changes to the latest version and "
                                   "try again", name=name, kind=resource[2])
            return 200, api._commit(resource, (namespace, name), apply_merge_patch(current, body), "MODIFIED", True)

        def _delete(self, resource, namespace, name, query, body):
            code, current = self._get(resource, namespace, name, query, body)
            if code != 200:
                return code, current
            uid = ((body or {}).get("preconditions") or {}).get("uid")
            if uid and uid != current["metadata"]["uid"]:
                return 409, status(409, "Conflict", f"Precondition failed: UID in precondition: {uid}, UID in object "
                                   f"meta: {current['metadata']['uid']}", name=name, kind=resource[2])
            del api.objects[resource][(namespace, name)]
            api._commit(resource, (namespace, name), current, "DELETED", True)
            return 200, current

        def _send(self, code, body, headers=None):
            data = json.dumps(body).encode() if body is not None else b""
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def _watch(self, resource, namespace, query):
            since = int(query.get("resourceVersion") or 0)
            deadline = time.monotonic() + float(query.get("timeoutSeconds") or 60)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            if since < api.compacted:
                return self._expire(f"too old resource version: {since} ({api.compacted})")
            while True:
                with api.cond:
                    api.cond.wait_for(lambda since=since: api.stopping or api.controls[resource]
                                      or time.monotonic() >= deadline
                                      or any(e.rv > since and e.resource == resource for e in api.history),
                                      timeout=max(0.0, deadline - time.monotonic()))
                    events = [e for e in api.history if e.rv > since and e.resource == resource]
                    controls, api.controls[resource] = api.controls[resource], []
                    now_rv = api.rv
                for event in events:
                    since = event.rv
                    if not namespace or event.object["metadata"].get("namespace") == namespace:
                        self._chunk({"type": event.type, "object": event.object})
                for action in controls:
                    if action == "bookmark" and query.get("allowWatchBookmarks") == "true":
                        self._chunk({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(now_rv)}}})
                        since = max(since, now_rv)
                    elif action == "expire":
                        return self._expire(f"too old resource version: {since} ({now_rv})")
                    elif action == "cut":
                        return self._cut()
                if api.stopping or time.monotonic() >= deadline:
                    return self._end()

        def _chunk(self, event):
            data = json.dumps(event).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def _end(self):
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        def _expire(self, message):
            self._chunk({"type": "ERROR", "object": status(410, "Expired", message)})
            self._end()

        def _cut(self):
            self.wfile.write(b"400\r\n{\"type\":\"MODI")
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)

    return Handler
