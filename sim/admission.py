"""Admission webhooks, called as the real API server calls them.

The configurations are ordinary stored objects. For each request the matching webhooks get an
AdmissionReview v1 over HTTPS (verified against the caBundle), shaped like the recorded ones in
the fixtures. Mutating webhooks run first, one after another, their JSON Patches applied in turn;
a webhook with `reinvocationPolicy: IfNeeded` that a later one changed the object after is called
once more, after all of them, as kube-apiserver's mutating dispatcher does. Validating webhooks
then see the final object. There is no cluster DNS, so a service reference is
resolved through a map, while the certificate is still checked against `NAME.NAMESPACE.svc`.
"""

import base64
import gzip
import http.client
import json
import logging
import socket
import ssl
import threading
import urllib.parse
import uuid
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

import celpy
import lark
import orjson
from celpy import celtypes

from sim.api import APIError, User
from sim.cel import environment, error_message
from sim.kinds import Kind
from sim.patching import apply_json_patch
from sim.selectors import Requirement, matches
from sim.status import forbidden, status
from sim.store import clone, to_json

log = logging.getLogger(__name__)

_HEADERS = {"User-Agent": "kube-apiserver-admission", "Accept": "application/json, */*",
            "Content-Type": "application/json", "Accept-Encoding": "gzip"}
_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions",
                 "CONNECT": "ConnectOptions"}


@dataclass
class Attributes:
    """What one API request is about, as admission sees it."""

    kind: Kind
    operation: str  # CREATE, UPDATE, DELETE
    name: str
    namespace: str
    user: User
    subresource: str = ""
    old: dict | None = None
    dry_run: bool = False
    options: dict = field(default_factory=dict)  # fieldManager, fieldValidation, propagationPolicy, ...
    request_kind: dict | None = None  # the Binding kind for pods/binding

    def review(self, obj: dict | None) -> dict:
        return {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1",
                "request": self.request(str(uuid.uuid4()), obj, with_objects=True)}

    def request(self, uid: str, obj: dict | None, *, with_objects: bool) -> dict:
        """The AdmissionRequest; without `object` and `oldObject` for matchConditions' `request`
        (whose uid is empty: no uuid drawn for every request a webhook is matched against)."""
        request = {"uid": uid, "kind": self.request_kind or self.kind.group_version_kind(),
                   "resource": self.kind.group_version_resource()}
        if self.subresource:
            request["subResource"] = self.subresource
        request["requestKind"] = request["kind"]
        request["requestResource"] = request["resource"]
        if self.subresource:
            request["requestSubResource"] = self.subresource
        if self.name:
            request["name"] = self.name
        if self.namespace:
            request["namespace"] = self.namespace
        user_info = {"username": self.user.username}
        if self.user.uid:
            user_info["uid"] = self.user.uid
        user_info["groups"] = list(self.user.groups)
        request.update(operation=self.operation, userInfo=user_info)
        if with_objects:
            request.update(object=obj, oldObject=self.old)
        request.update(dryRun=self.dry_run,
                       options={"kind": _OPTIONS_KIND[self.operation], "apiVersion": "meta.k8s.io/v1", **self.options})
        return request


def rule_matches(rule: dict, attrs: Attributes) -> bool:
    resource = attrs.kind.plural + (f"/{attrs.subresource}" if attrs.subresource else "")
    scope = rule.get("scope", "*")

    def listed(values, wanted):
        return "*" in (values or []) or wanted in (values or [])

    resources = rule.get("resources") or []
    resource_ok = resource in resources or "*/*" in resources or \
        ("*" in resources and not attrs.subresource) or \
        (attrs.subresource and f"{attrs.kind.plural}/*" in resources) or \
        (attrs.subresource and f"*/{attrs.subresource}" in resources)
    scope_ok = scope == "*" or (scope == "Namespaced") == attrs.kind.namespaced
    return (listed(rule.get("operations"), attrs.operation) and listed(rule.get("apiGroups"), attrs.kind.group)
            and listed(rule.get("apiVersions"), attrs.kind.version) and bool(resource_ok) and scope_ok)


def selector_requirements(selector: dict | None) -> list[Requirement] | None:
    """A metav1.LabelSelector as requirements; None for the empty selector, which matches everything."""
    if not selector:
        return None
    out = [Requirement(k, "=", (v,)) for k, v in (selector.get("matchLabels") or {}).items()]
    operators = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expression in selector.get("matchExpressions") or []:
        out.append(Requirement(expression["key"], operators[expression["operator"]],
                               tuple(expression.get("values") or ())))
    return out


# Serves a webhook in process: (URL path, AdmissionReview request) → the AdmissionReview answer,
# as the webhook's HTTP endpoint would answer it. The review holds the object under admission
# itself, not a copy: the handler must not change it.
InProcessWebhook = Callable[[str, dict], dict]


class Admission:
    """The webhook chain of one API server."""

    def __init__(self, configurations: Callable[[str], list[dict]], namespace_labels: Callable[[str], dict | None],
                 services: dict[str, str | InProcessWebhook] | None = None):
        """`configurations(plural)` lists the stored webhook configurations of that kind;
        `services` maps `NAME.NAMESPACE.svc[:PORT]` to the `HOST:PORT` that really serves it, or to
        an `InProcessWebhook` that answers in this process: the webhook's configuration (rules,
        selectors, failurePolicy) and answer (patch, denial) are applied as for HTTPS, without the
        transport, so that a long replay on a virtual clock can run a real webhook's policy."""
        self._configurations = configurations
        self._namespace_labels = namespace_labels
        self.services = dict(services or {})
        self._connections = _Connections()
        self._prepared: dict[str, _Prepared] = {}
        self._prepared_lock = threading.Lock()

    def mutate(self, attrs: Attributes, obj: dict) -> tuple[dict, list[str]]:
        """Every matching mutating webhook in turn; then, once, those marked `reinvocationPolicy:
        IfNeeded` that a webhook after them changed the object since (still matching it), in the
        same order. A webhook is called again at most once, however the second round goes."""
        warnings: list[str] = []
        invoked: list[int] = []  # IfNeeded webhooks called since the object last changed
        again: set[int] = set()
        for webhook in self._webhooks("mutatingwebhookconfigurations", attrs, obj):
            obj, changed = self._mutate_once(webhook, attrs, obj, warnings)
            if changed:
                again.update(invoked)
                invoked = []
            if webhook.get("reinvocationPolicy") == "IfNeeded":
                invoked.append(id(webhook))
        if again:
            for webhook in self._webhooks("mutatingwebhookconfigurations", attrs, obj):
                if id(webhook) in again:
                    obj, _ = self._mutate_once(webhook, attrs, obj, warnings)
        return obj, warnings

    def _mutate_once(self, webhook: dict, attrs: Attributes, obj: dict, warnings: list[str]) -> tuple[dict, bool]:
        """The object as the webhook's answer leaves it, and whether that changed it."""
        response = self._call(webhook, attrs, obj)
        if response is None:
            return obj, False
        warnings += response.get("warnings") or []
        _raise_if_denied(webhook, response)
        if not response.get("patch"):
            return obj, False
        patched = _patched(webhook, obj, response["patch"])
        return patched, patched != obj

    def validate(self, attrs: Attributes, obj: dict | None) -> list[str]:
        warnings: list[str] = []
        for webhook in self._webhooks("validatingwebhookconfigurations", attrs, obj):
            response = self._call(webhook, attrs, obj)
            if response is None:
                continue
            warnings += response.get("warnings") or []
            _raise_if_denied(webhook, response)
        return warnings

    def _webhooks(self, plural: str, attrs: Attributes, obj: dict | None) -> list[dict]:
        configurations = self._configurations(plural)
        with self._prepared_lock:
            prepared = self._prepared.get(plural)
            if prepared is None or not prepared.holds(configurations):
                prepared = self._prepared[plural] = _Prepared(configurations)
        return [w.webhook for w in prepared.webhooks if self._matches(w, attrs, obj)]

    def _matches(self, prepared: "_Webhook", attrs: Attributes, obj: dict | None) -> bool:
        if not prepared.rules_match(attrs):
            return False
        webhook = prepared.webhook
        namespace_selector = prepared.selector("namespaceSelector")
        if namespace_selector is not None and (attrs.namespace or attrs.kind.plural == "namespaces"):
            labels = self._namespace_labels(attrs.namespace or attrs.name)
            if labels is None and attrs.kind.plural == "namespaces":
                labels = ((obj or attrs.old or {}).get("metadata") or {}).get("labels") or {}
            if not matches(namespace_selector, labels):
                return False
        object_selector = prepared.selector("objectSelector")
        if object_selector is not None and not any(matches(object_selector, (o.get("metadata") or {}).get("labels"))
                                                   for o in (obj, attrs.old) if o is not None):
            return False
        return _conditions_hold(webhook, attrs, obj)

    def _call(self, webhook: dict, attrs: Attributes, obj: dict | None) -> dict | None:
        """The webhook's `response`, or None when it failed and its failurePolicy is Ignore."""
        name, timeout = webhook["name"], int(webhook.get("timeoutSeconds") or 10)
        review = attrs.review(obj)
        url = self._url(webhook.get("clientConfig") or {}, timeout)
        try:
            answer = self._post(webhook.get("clientConfig") or {}, url, review, timeout)
            response = answer.get("response") or {}
            if response.get("uid") != review["request"]["uid"]:
                raise ValueError(f"expected response.uid={review['request']['uid']!r}, got {response.get('uid')!r}")
            return response
        except (OSError, ValueError, http.client.HTTPException) as e:
            if webhook.get("failurePolicy", "Fail") == "Ignore":
                log.warning("failed calling webhook %r, ignored: %s", name, e)
                return None
            message = f'failed calling webhook "{name}": failed to call webhook: Post "{url}": {e}'
            raise APIError(status(500, "InternalError", f"Internal error occurred: {message}",
                                  {"causes": [{"message": message}]})) from None

    @staticmethod
    def _url(client_config: dict, timeout: int) -> str:
        if client_config.get("url"):
            base = client_config["url"]
        else:
            service = client_config.get("service") or {}
            port = service.get("port", 443)
            base = f"https://{service.get('name')}.{service.get('namespace')}.svc:{port}{service.get('path', '')}"
        separator = "&" if "?" in base else "?"
        return f"{base}{separator}timeout={timeout}s"

    def _post(self, client_config: dict, url: str, review: dict, timeout: int) -> dict:
        parsed = urllib.parse.urlsplit(url)
        address = self.services.get(parsed.netloc) or self.services.get(parsed.hostname or "") or parsed.netloc
        if callable(address):
            return address(parsed.path, review)
        path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
        reply, body = self._connections.post(address, parsed.hostname or "", client_config.get("caBundle"),
                                             path, to_json(review), timeout)
        if reply.status != 200:
            raise ValueError(f"expected webhook response of 200, got {reply.status}")
        if reply.getheader("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        return orjson.loads(body)


class _Prepared:
    """The webhooks of one kind of configuration in the order they are called (configurations by
    name), each remembering what it worked out: whether its rules match a kind of request, its
    parsed selectors. Kept while the configurations stay as they were: the same objects listed (a
    stored object is replaced, never changed, on every write), each still equal to the copy taken
    here (a caller changing one in place is seen too), so a change applies to the very next request."""

    def __init__(self, configurations: list[dict]):
        self._listed = list(configurations)
        self._copies = [clone(c) for c in configurations]
        ordered = sorted(configurations, key=lambda c: c["metadata"]["name"])
        self.webhooks = [_Webhook(w) for c in ordered for w in c.get("webhooks") or []]

    def holds(self, configurations: list[dict]) -> bool:
        return len(configurations) == len(self._listed) and all(
            c is listed and c == copy for c, listed, copy in zip(configurations, self._listed, self._copies))


class _Webhook:
    """One configured webhook and what it worked out so far. Only results are remembered: a rule
    or selector that does not parse raises again on each request that reaches it, as before."""

    def __init__(self, webhook: dict):
        self.webhook = webhook
        self._rules: dict[tuple, bool] = {}
        self._selectors: dict[str, list[Requirement] | None] = {}

    def rules_match(self, attrs: Attributes) -> bool:
        """Whether a rule matches: it depends on the kind, operation and subresource alone."""
        key = (attrs.kind, attrs.operation, attrs.subresource)
        matched = self._rules.get(key)
        if matched is None:
            matched = self._rules[key] = any(rule_matches(rule, attrs) for rule in self.webhook.get("rules") or [])
        return matched

    def selector(self, field: str) -> list[Requirement] | None:
        if field not in self._selectors:
            self._selectors[field] = selector_requirements(self.webhook.get(field))
        return self._selectors[field]


# --- matchConditions -----------------------------------------------------------------------
# As kube-apiserver evaluates them (admission/plugin/webhook/matchconditions/matcher.go), after
# the rules and selectors matched: CEL over `object`, `oldObject` and `request`; any condition
# false skips the webhook, all true call it, and an error with none false is the failurePolicy's:
# Fail refuses the request (403, the errors as the message), Ignore skips the webhook. Not
# provided: `authorizer` (an expression using it fails as any other error does), Kubernetes' CEL
# libraries beyond celpy's standard ones, the cost budget, and the checks the real server makes
# when the configuration is written (at most 64 conditions, unique names, the expression compiles
# to a bool): a stored expression that does not compile is an error on every request it meets.

_VARIABLES = ("object", "oldObject", "request")
_VERDICTS_KEPT = 4096  # per expression: verdicts remembered, by the data they were drawn from


def _conditions_hold(webhook: dict, attrs: Attributes, obj: dict | None) -> bool:
    """Whether the webhook's matchConditions let it be called; raises when they failed and it fails closed."""
    conditions = webhook.get("matchConditions")
    if not conditions:
        return True
    variables = {"object": obj, "oldObject": attrs.old, "request": _cel_request(attrs)}
    errors = []
    for condition in conditions:
        verdict = _condition(condition.get("expression") or "").verdict(variables)
        if verdict is False:
            return False
        if verdict is not True:
            errors.append(verdict)
    if not errors:
        return True
    if webhook.get("failurePolicy", "Fail") == "Ignore":
        return False
    log.warning("failed evaluating match conditions, failing closed %s: %s", webhook["name"], errors)
    raise forbidden(attrs.kind.group, attrs.kind.plural, attrs.name, _aggregate(errors))


def _cel_request(attrs: Attributes) -> dict:
    """`request` as CEL sees it (cel.CreateAdmissionRequest): the webhook's AdmissionRequest with an
    empty uid, without the objects (they are variables of their own) and, as its JSON tags say,
    without empty groups."""
    request = attrs.request("", None, with_objects=False)
    if not request["userInfo"]["groups"]:
        del request["userInfo"]["groups"]
    return request


class _Condition:
    """One expression, compiled once, and its verdicts so far.

    CEL is pure, so a verdict depends only on the data the expression reads; those reads are found
    in the syntax tree once (`_reads`), and a request whose data there is the same as an earlier
    one's gets the earlier verdict without evaluating again: the controller's thousands of pod
    updates cost one evaluation, not one each (celpy takes milliseconds per evaluation)."""

    def __init__(self, expression: str):
        self.expression = expression
        self._verdicts: dict[tuple, bool | str] = {}
        try:
            tree = environment().compile(expression)
            self._program = environment().program(tree)
        except Exception as error:  # celpy's parser raises CELParseError and lark's own errors
            self._program, self._reads = None, ()
            self._error = f"compilation error: {_cel_error(error)}"
            return
        reads = set(_reads(tree))
        self._reads = tuple(sorted(path for path in reads if path[0] in _VARIABLES))
        if any(path[0] == "authorizer" for path in reads):
            self._program = None
            self._error = f"expression '{expression}' resulted in error: the emulation has no authorizer variable"

    def verdict(self, variables: dict) -> bool | str:
        """True, False, or the error, as kube-apiserver words it."""
        if self._program is None:
            return self._error
        key = tuple(_read(variables, path) for path in self._reads)
        verdict = self._verdicts.get(key)
        if verdict is None:
            if len(self._verdicts) >= _VERDICTS_KEPT:
                self._verdicts.clear()
            verdict = self._verdicts[key] = self._evaluate(variables)
        return verdict

    def _evaluate(self, variables: dict) -> bool | str:
        activation = {name: celpy.json_to_cel(variables[name]) for name in {path[0] for path in self._reads}}
        try:
            result = self._program.evaluate(activation)
        except Exception as error:  # celpy raises CELEvalError, and whatever a broken expression makes it raise
            return f"expression '{self.expression}' resulted in error: {_cel_error(error)}"
        if not isinstance(result, celtypes.BoolType):
            # The real server refuses such an expression when the configuration is written.
            return f"compilation error: must evaluate to bool but got {type(result).__name__}"
        return bool(result)


@lru_cache(maxsize=256)
def _condition(expression: str) -> _Condition:
    return _Condition(expression)


def _reads(tree: lark.Tree):
    """Each reference to a name with the fields selected from it, as far as they are plain field
    selections (`request.userInfo.username`; `object.metadata.labels` of `object.metadata.labels["a"]`)."""
    pending = [tree]
    while pending:
        node = pending.pop()
        if not isinstance(node, lark.Tree):
            continue
        path = _selection(node)
        if path:
            yield path
        else:
            pending.extend(node.children)


def _selection(node: lark.Tree) -> tuple[str, ...] | None:
    fields = []
    while node.data in ("member", "member_dot"):
        if node.data == "member_dot":
            fields.append(str(node.children[1]))
        node = node.children[0]
        if not isinstance(node, lark.Tree):
            return None
    if node.data != "primary" or not isinstance(node.children[0], lark.Tree):
        return None
    ident = node.children[0]
    if ident.data not in ("ident", "dot_ident"):
        return None
    return (str(ident.children[0]), *reversed(fields))


def _read(variables: dict, path: tuple[str, ...]) -> tuple:
    """What `path` reads in `variables`, hashable: how far it got, and the value there or its absence."""
    value = variables[path[0]]
    for depth, name in enumerate(path[1:]):
        if not isinstance(value, dict):
            return depth, _frozen(value)
        if name not in value:
            return depth, "absent"
        value = value[name]
    return len(path) - 1, _frozen(value)


def _frozen(value) -> tuple:
    if isinstance(value, (dict, list)):
        return "json", json.dumps(value, sort_keys=True)
    return type(value).__name__, value


def _aggregate(errors: list[str]) -> str:
    """utilerrors.NewAggregate's message: one error as it is, several once each in brackets."""
    distinct = list(dict.fromkeys(errors))
    return distinct[0] if len(distinct) == 1 else "[" + ", ".join(distinct) + "]"


def _cel_error(error: Exception) -> str:
    """celpy's message on one line, without the dump of the whole activation it appends; a missing
    map key in cel-go's words (`no such key: team`)."""
    if len(error.args) == 3 and error.args[1] is KeyError and error.args[2]:
        return f"no such key: {error.args[2][0]}"
    return error_message(error)


# How a kept-alive connection the webhook closed while it was idle fails on its next use: a TLS
# server that just closes the socket (gunicorn at its keepalive timeout, or when it stops) sends no
# close_notify, so reading the answer ends in SSLEOFError rather than a clean RemoteDisconnected.
_CLOSED_BY_PEER = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ssl.SSLEOFError)


class _Connections:
    """Kept-alive HTTPS connections to webhooks, as the real API server keeps them: one TLS
    handshake per connection, not per admission. Keyed by where the webhook listens, the name
    its certificate must carry and the caBundle that must have signed it."""

    def __init__(self):
        self._idle: dict[tuple, list[http.client.HTTPConnection]] = {}
        self._contexts: dict[str | None, ssl.SSLContext] = {}
        self._lock = threading.Lock()

    def post(self, address: str, hostname: str, ca_bundle: str | None, path: str, body: bytes,
             timeout: float) -> tuple[http.client.HTTPResponse, bytes]:
        key = (address, hostname, ca_bundle)
        connection, reused = self._take(key, timeout)
        try:
            reply, data = self._exchange(connection, path, body, timeout)
        except _CLOSED_BY_PEER:
            connection.close()
            if not reused:
                raise
            # The webhook closed an idle kept-alive connection: a fresh one, once.
            connection = self._connect(key, timeout)
            reply, data = self._exchange(connection, path, body, timeout)
        except Exception:
            connection.close()
            raise
        if reply.will_close:
            connection.close()
        else:
            with self._lock:
                self._idle.setdefault(key, []).append(connection)
        return reply, data

    @staticmethod
    def _exchange(connection: http.client.HTTPConnection, path: str, body: bytes,
                  timeout: float) -> tuple[http.client.HTTPResponse, bytes]:
        connection.timeout = timeout
        if connection.sock is not None:
            connection.sock.settimeout(timeout)
        connection.request("POST", path, body, headers=_HEADERS)
        reply = connection.getresponse()
        return reply, reply.read()

    def _take(self, key: tuple, timeout: float) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            idle = self._idle.get(key)
            if idle:
                return idle.pop(), True
        return self._connect(key, timeout), False

    def _connect(self, key: tuple, timeout: float) -> http.client.HTTPConnection:
        address, hostname, ca_bundle = key
        host, _, port = address.rpartition(":")
        connection = _PinnedHTTPSConnection(host, int(port), hostname, self._context(ca_bundle), timeout)
        connection.connect()
        return connection

    def _context(self, ca_bundle: str | None) -> ssl.SSLContext:
        with self._lock:
            if ca_bundle not in self._contexts:
                self._contexts[ca_bundle] = _tls_context(ca_bundle)
            return self._contexts[ca_bundle]


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """Connects to `host:port` but verifies the certificate for `hostname` (the service's DNS
    name: there is no cluster DNS here to resolve it)."""

    def __init__(self, host: str, port: int, hostname: str, context: ssl.SSLContext, timeout: float):
        super().__init__(host, port, timeout=timeout, context=context)
        self._hostname = hostname

    def connect(self) -> None:
        raw = socket.create_connection((self.host, self.port), self.timeout)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = self._context.wrap_socket(raw, server_hostname=self._hostname)


def _tls_context(ca_bundle: str | None) -> ssl.SSLContext:
    if ca_bundle:
        return ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())
    return ssl.create_default_context()


def _patched(webhook: dict, obj: dict, patch: str) -> dict:
    """The object with the webhook's JSON Patch applied; a patch that does not apply is the webhook's fault (500)."""
    try:
        return apply_json_patch(obj, json.loads(base64.b64decode(patch)))
    except (APIError, ValueError):
        message = f'JSON patch of webhook "{webhook["name"]}" does not apply to the object'
        raise APIError(status(500, "InternalError", f"Internal error occurred: {message}",
                              {"causes": [{"message": message}]})) from None


def _raise_if_denied(webhook: dict, response: dict) -> None:
    """A denial becomes the webhook's own Status, its message prefixed as the real server does."""
    if response.get("allowed"):
        return
    result = dict(response.get("status") or {})
    denied_by = f'admission webhook "{webhook["name"]}" denied the request'
    if result.get("message"):
        message = f"{denied_by}: {result['message']}"
    elif result.get("reason"):
        message = f"{denied_by}: {result['reason']}"
    else:
        message = f"{denied_by} without explanation"
    code = int(result.get("code") or 0)
    body = status(code if code >= 400 else 400, result.get("reason", ""), message, result.get("details"))
    if not body["reason"]:
        del body["reason"]
    raise APIError(body)
