"""Hostile input for the webhook: what a broken or malicious client could send to /mutate and /validate.

One generator of cases and one checker of answers, shared by the fast property test
(tests/security/test_fuzz.py, a few hundred cases through Flask's test client) and `run` (the
full version for `make bench`: thousands of cases through the test client, then a few hundred
over HTTPS to real gunicorn, checking that no worker died on the way).

Every case is a category (what kind of attack it is) and the bytes of one HTTP request. The
answer must hold whatever the input was:

- never an HTTP 5xx, and always a JSON object;
- HTTP 400 is `{"error": "…"}` that says what was wrong, and names the request's uid when the
  body had a readable one;
- HTTP 200 is an AdmissionReview answering that uid; a refusal (`allowed: false`) carries a
  message; a patch is base64 of a JSON list.

An `internal error` answer (the policy raised; the app turns it into `allowed: false`, code 500)
is not a 5xx on the wire, but it is a policy crash on input the policy should have refused with
a reason, so it counts as a violation too.

Imports hypothesis, a test dependency: only the tests and the benchmark import this module.
"""

import base64
import copy
import http.client
import json
import os
import socket
import ssl
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as fixed_seed
from hypothesis import strategies as st

from gangkeeper import names

API_VERSION, KIND = "admission.k8s.io/v1", "AdmissionReview"
CONTROLLER = names.DEFAULT_CONTROLLER_USERNAME
NAMESPACE = "ml-training"
HUGE_CHARS = 100_000
DEEP_LEVELS = 1_000
# The fast test and `run` serve with this body limit, so that an oversized case costs little.
FUZZ_MAX_BODY_BYTES = 1 * 2**20
JSON = "application/json"


@dataclass(frozen=True)
class Case:
    category: str
    path: str  # /mutate or /validate
    body: bytes
    content_type: str | None = JSON

    def given_uid(self, max_body_bytes: int) -> str | None:
        """The uid a correct server can read from this request, or None when it cannot read one."""
        if self.content_type != JSON or len(self.body) > max_body_bytes:
            return None
        try:
            document = json.loads(self.body, parse_constant=_not_json)
            json.dumps(document, ensure_ascii=False).encode()  # lone surrogates: not Unicode text
        except (ValueError, RecursionError):
            return None
        request = document.get("request") if isinstance(document, dict) else None
        uid = request.get("uid") if isinstance(request, dict) else None
        return uid if isinstance(uid, str) and uid else None


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON (RFC 8259)")


# --- well-formed material -------------------------------------------------------------------

USERS = (CONTROLLER, "alice@example.com", "system:serviceaccount:ml-training:training-operator",
         "system:admin", "")
HOSTILE_STRINGS = (
    "\x00", "a\x00b", "\ud800", "\udfff", "x\ud83d", "\u202egnag", "\u200f\u200e", "e\u0301", "\ufeff",
    "𝔤𝔞𝔫𝔤", "👩‍👩‍👧", "\uffff", "\\", "\"", "/", "~1", "../../etc/passwd", " ", "", "null", "NaN",
    "gangkeeper.io/gang", CONTROLLER.upper(), CONTROLLER + " ", CONTROLLER + "2", "%s%n{0}",
)
BAD_QUANTITIES = ("", " ", "-1", "1e309", "1E999999999", "∞", "NaN", "Infinity", "0x10", "1.5.5", "8Gi ", " 8",
                  "8 Gi", "9" * 400, "1e-400", "0.0000000000000000000001", ".", "+", "Gi", "1Ki1", "٣", "８")


def hostile_text() -> st.SearchStrategy[str]:
    return st.one_of(st.sampled_from(HOSTILE_STRINGS), st.text(max_size=20),
                     st.text(alphabet=st.characters(categories=["Cs", "Cc", "Cf", "Co"]), max_size=8))


def wrong_value() -> st.SearchStrategy[object]:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
                        st.floats(allow_nan=True, allow_infinity=True), hostile_text())
    return st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(hostile_text(), inner, max_size=3)),
                        max_leaves=6)


@st.composite
def pods(draw) -> dict:
    """A pod as the API server would send it, in one of the shapes gangkeeper cares about."""
    labels, annotations = {}, {}
    shape = draw(st.sampled_from(("explicit", "pytorchjob", "job", "accelerator", "plain", "jobset")))
    if shape == "explicit":
        labels[names.GROUP_LABEL] = draw(st.sampled_from(("llm", "team-a.run-1", "x" * 63)))
        annotations[names.MIN_COUNT_ANNOTATION] = draw(st.sampled_from(("1", "4", "0", "100001")))
    elif shape == "jobset":
        labels |= {names.JOBSET_NAME_LABEL: "js", names.JOBSET_UID_LABEL: "u-1",
                   names.JOBSET_RESTART_ATTEMPT_LABEL: "0"}
    owners = []
    if shape in ("pytorchjob", "job"):
        kind = names.PYTORCHJOB_KIND if shape == "pytorchjob" else "Job"
        labels[names.KUBEFLOW_JOB_NAME_LABEL if shape == "pytorchjob" else names.JOB_NAME_LABEL] = "bert"
        owners.append({"apiVersion": "v1", "kind": kind, "name": "bert", "uid": "6f1c7c1e", "controller": True})
    gpus = draw(st.sampled_from(("0", "1", "8"))) if shape != "plain" else "0"
    requests = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": gpus}
    container = {"name": "main", "image": "registry.example.com/train:1", "command": ["python", "train.py"],
                 "resources": {"requests": dict(requests), "limits": dict(requests)}}
    metadata = {"name": "p-0", "namespace": NAMESPACE, "labels": labels, "annotations": annotations}
    if owners:
        metadata["ownerReferences"] = owners
    spec: dict = {"containers": [container]}
    if draw(st.booleans()):
        spec["schedulingGates"] = [{"name": names.SCHEDULING_GATE}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


@st.composite
def reviews(draw) -> dict:
    """An AdmissionReview request for a pod (or now and then a Gang), CREATE, UPDATE or DELETE."""
    operation = draw(st.sampled_from(("CREATE", "UPDATE", "DELETE")))
    obj = draw(pods())
    kind = {"group": "", "version": "v1", "kind": "Pod"}
    if draw(st.integers(0, 9)) == 0:
        kind = {"group": names.GANG_GROUP, "version": names.GANG_VERSION, "kind": names.GANG_KIND}
        obj = {"apiVersion": f"{names.GANG_GROUP}/{names.GANG_VERSION}", "kind": names.GANG_KIND,
               "metadata": {"name": "llm", "namespace": NAMESPACE}, "spec": {"minCount": 4}}
    old = None
    if operation == "UPDATE":
        old = copy.deepcopy(obj)
        old.setdefault("spec", {})["schedulingGates"] = [{"name": names.SCHEDULING_GATE}]
    elif operation == "DELETE":
        obj, old = None, obj
    request = {
        "uid": draw(st.sampled_from(("5d3c1a2b-0000-4000-8000-000000000001", "u")) | st.uuids().map(str)),
        "kind": kind,
        "resource": {"group": kind["group"], "version": kind["version"], "resource": kind["kind"].lower() + "s"},
        "name": "p-0", "namespace": NAMESPACE, "operation": operation,
        "userInfo": {"username": draw(st.sampled_from(USERS)), "uid": "1", "groups": ["system:authenticated"]},
        "object": obj, "oldObject": old, "dryRun": draw(st.booleans()),
    }
    return {"apiVersion": API_VERSION, "kind": KIND, "request": request}


# --- paths into a document ------------------------------------------------------------------

Path_ = tuple[object, ...]
# The places the brief of this fuzzer names, always among the candidates of a wrong-type case.
NAMED_PATHS: tuple[Path_, ...] = (
    ("request",), ("request", "uid"), ("request", "object"), ("request", "oldObject"), ("request", "kind"),
    ("request", "userInfo"), ("request", "userInfo", "username"), ("request", "userInfo", "groups"),
    ("request", "operation"), ("request", "dryRun"), ("request", "namespace"), ("request", "name"),
    ("request", "object", "metadata"), ("request", "object", "metadata", "labels"),
    ("request", "object", "metadata", "annotations"), ("request", "object", "metadata", "ownerReferences"),
    ("request", "object", "spec"), ("request", "object", "spec", "containers"),
    ("request", "object", "spec", "containers", 0), ("request", "object", "spec", "containers", 0, "resources"),
    ("request", "object", "spec", "schedulingGates"), ("request", "oldObject", "spec", "schedulingGates"),
    ("request", "oldObject", "metadata", "labels"), ("request", "object", "spec", "minCount"),
)


def paths_in(document: object, prefix: Path_ = ()) -> list[Path_]:
    """Every path to a value in the document (dict keys and list indices)."""
    found = []
    if isinstance(document, dict):
        items = document.items()
    elif isinstance(document, list):
        items = enumerate(document)
    else:
        return found
    for key, value in items:
        found.append((*prefix, key))
        found.extend(paths_in(value, (*prefix, key)))
    return found


def put(document: dict, path: Path_, value: object) -> dict:
    """The document with the value at `path` replaced (created, when only the last step is missing)."""
    document = copy.deepcopy(document)
    parent = _parent(document, path)
    if isinstance(parent, dict):
        parent[path[-1]] = value
    elif isinstance(parent, list) and isinstance(path[-1], int) and path[-1] < len(parent):
        parent[path[-1]] = value
    return document


def drop(document: dict, path: Path_) -> dict:
    document = copy.deepcopy(document)
    parent = _parent(document, path)
    if isinstance(parent, dict):
        parent.pop(path[-1], None)
    elif isinstance(parent, list) and isinstance(path[-1], int) and path[-1] < len(parent):
        del parent[path[-1]]
    return document


def _parent(document: object, path: Path_) -> object:
    node = document
    for step in path[:-1]:
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and isinstance(step, int) and step < len(node):
            node = node[step]
        else:
            return None
    return node


def _encode(document: object) -> bytes:
    """JSON as a client would send it; lone surrogates travel as \\ud800 escapes (valid JSON text)."""
    return json.dumps(document, allow_nan=True).encode()


def _deep(levels: int, kind: str) -> bytes:
    """`levels` nested lists or objects as JSON text, built as text: Python's own encoder (and
    deepcopy) would hit the recursion limit first."""
    opening, closing = (b"[", b"]") if kind == "list" else (b'{"a":', b"}")
    return opening * levels + b'"bottom"' + closing * levels


# --- the categories -------------------------------------------------------------------------


@st.composite
def malformed_json(draw) -> tuple[bytes, str | None]:
    body = _encode(draw(reviews()))
    broken = draw(st.sampled_from(("random", "truncated", "bad-utf8", "not-an-object", "trailing", "nan",
                                   "wrong-content-type", "empty")))
    if broken == "random":
        return draw(st.binary(max_size=300)), JSON
    if broken == "truncated":
        return body[: draw(st.integers(0, len(body) - 1))], JSON
    if broken == "bad-utf8":
        at = draw(st.integers(0, len(body)))
        invalid = draw(st.sampled_from((b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80")))
        return body[:at] + invalid + body[at:], JSON
    if broken == "not-an-object":
        return _encode(draw(st.one_of(st.lists(st.integers(), max_size=3), st.text(), st.integers(), st.none()))), JSON
    if broken == "trailing":
        return body + draw(st.sampled_from((b"}", b"]", b",", b"{}", b"\x00"))), JSON
    if broken == "nan":
        return b'{"apiVersion":NaN,"kind":Infinity,"request":-Infinity}', JSON
    if broken == "wrong-content-type":
        return body, draw(st.sampled_from((None, "text/plain", "application/x-www-form-urlencoded",
                                           "multipart/form-data; boundary=x", "application/jsonx")))
    return b"", JSON


@st.composite
def wrong_types(draw) -> bytes:
    document = draw(reviews())
    path = draw(st.sampled_from(NAMED_PATHS) | st.sampled_from(paths_in(document)))
    return _encode(put(document, path, draw(wrong_value())))


@st.composite
def bad_quantities(draw) -> bytes:
    document = draw(reviews())
    quantity = st.one_of(st.sampled_from(BAD_QUANTITIES), wrong_value())
    resource = st.sampled_from(("nvidia.com/gpu", "cpu", "memory", "amd.com/gpu", "gpu.intel.com/xe",
                                "aws.amazon.com/neuroncore")) | hostile_text()
    resources = draw(st.dictionaries(resource, quantity, min_size=1, max_size=4))
    where = draw(st.sampled_from(("requests", "limits", "both", "overhead", "init")))
    for side in ("object", "oldObject"):
        spec = (document["request"].get(side) or {}).get("spec")
        if not isinstance(spec, dict) or "containers" not in spec:
            continue
        if where == "overhead":
            spec["overhead"] = resources
        elif where == "init":
            spec["initContainers"] = [{"name": "init", "resources": {"requests": resources}}]
        else:
            target = spec["containers"][0]["resources"]
            for key in (("requests", "limits") if where == "both" else (where,)):
                target[key] = resources
    return _encode(document)


@st.composite
def gates(draw) -> bytes:
    document = draw(reviews())
    gate = st.one_of(st.just({}), st.fixed_dictionaries({"name": wrong_value()}),
                     st.just({"name": names.SCHEDULING_GATE, "extra": [1]}), wrong_value())
    value = draw(st.one_of(st.lists(gate, max_size=3), wrong_value(), st.just(names.SCHEDULING_GATE),
                           st.just({"name": names.SCHEDULING_GATE})))
    side = draw(st.sampled_from(("object", "oldObject")))
    document = put(document, ("request", side, "spec", "schedulingGates"), value)
    document["request"]["userInfo"]["username"] = draw(st.sampled_from(USERS))
    return _encode(document)


@st.composite
def huge(draw) -> bytes:
    document = draw(reviews())
    value = draw(st.sampled_from(("x", "9", "\u202e", "é", "\x00"))) * HUGE_CHARS
    where = draw(st.sampled_from(("label", "annotation", "group-label", "min-count", "label-key", "uid", "username",
                                  "gate-name", "many-labels", "name")))
    request = document["request"]
    target = request.get("object") or request.get("oldObject")
    metadata = target.setdefault("metadata", {})
    if where == "label":
        metadata.setdefault("labels", {})["big"] = value
    elif where == "annotation":
        metadata.setdefault("annotations", {})["big"] = value
    elif where == "group-label":
        metadata.setdefault("labels", {})[names.GROUP_LABEL] = value
    elif where == "min-count":
        metadata.setdefault("annotations", {})[names.MIN_COUNT_ANNOTATION] = value
    elif where == "label-key":
        metadata.setdefault("labels", {})[value] = "v"
    elif where == "uid":
        request["uid"] = value
    elif where == "username":
        request["userInfo"]["username"] = value
    elif where == "gate-name":
        target.setdefault("spec", {})["schedulingGates"] = [{"name": value}]
    elif where == "many-labels":
        metadata["labels"] = {f"k{index}": "v" * 50 for index in range(5_000)}
    else:
        metadata["name"] = request["name"] = value
    return _encode(document)


@st.composite
def deep(draw) -> bytes:
    document = draw(reviews())
    levels = draw(st.sampled_from((DEEP_LEVELS, DEEP_LEVELS // 2, DEEP_LEVELS * 5)))
    value = _deep(levels, draw(st.sampled_from(("list", "dict"))))
    path = draw(st.sampled_from(NAMED_PATHS + (("request", "object", "metadata", "labels", names.GROUP_LABEL),
                                               ("request", "object", "metadata", "annotations", "a"),
                                               ("request", "object", "spec", "containers", 0, "env"))))
    if draw(st.integers(0, 4)) == 0:
        return value
    return _encode(put(document, path, _DEEP_MARK)).replace(f'"{_DEEP_MARK}"'.encode(), value)


_DEEP_MARK = "@@deep@@"


@st.composite
def unicode(draw) -> bytes:
    document = draw(reviews())
    strings = [path for path in paths_in(document) if isinstance(_get(document, path), str)]
    for path in draw(st.lists(st.sampled_from(strings), min_size=1, max_size=4)):
        document = put(document, path, draw(hostile_text()))
    if draw(st.booleans()):
        labels = _get(document, ("request", "object", "metadata", "labels"))
        if isinstance(labels, dict):
            labels[draw(hostile_text())] = draw(hostile_text())
    return _encode(document)


@st.composite
def missing(draw) -> bytes:
    document = draw(reviews())
    for path in draw(st.lists(st.sampled_from(NAMED_PATHS) | st.sampled_from(paths_in(document)),
                              min_size=1, max_size=3)):
        document = drop(document, path)
    return _encode(document)


def oversized(limit: int) -> st.SearchStrategy[bytes]:
    @st.composite
    def build(draw) -> bytes:
        document = draw(reviews())
        document["request"]["padding"] = ""
        body = _encode(document)
        over = limit + draw(st.integers(1, 4096)) - len(body)
        document["request"]["padding"] = "p" * max(over, 0)
        return _encode(document)

    return build()


@st.composite
def well_formed(draw) -> bytes:
    return _encode(draw(reviews()))


def _get(document: object, path: Path_) -> object:
    parent = _parent(document, path)
    if isinstance(parent, dict):
        return parent.get(path[-1])
    if isinstance(parent, list) and isinstance(path[-1], int) and path[-1] < len(parent):
        return parent[path[-1]]
    return None


def categories(max_body_bytes: int = FUZZ_MAX_BODY_BYTES) -> dict[str, st.SearchStrategy]:
    """Each category of hostile input as a strategy of (body, content type)."""
    json_body = lambda strategy: strategy.map(lambda body: (body, JSON))  # noqa: E731
    return {
        "malformed-json": malformed_json(),
        "wrong-type": json_body(wrong_types()),
        "bad-quantity": json_body(bad_quantities()),
        "gates": json_body(gates()),
        "huge": json_body(huge()),
        "deep-nesting": json_body(deep()),
        "unicode": json_body(unicode()),
        "missing-field": json_body(missing()),
        "oversized": json_body(oversized(max_body_bytes)),
        "well-formed": json_body(well_formed()),
    }


def cases(max_body_bytes: int = FUZZ_MAX_BODY_BYTES) -> st.SearchStrategy[Case]:
    endpoint = st.sampled_from(("/mutate", "/validate"))
    return st.one_of(*(st.tuples(st.just(name), endpoint, strategy).map(
        lambda drawn: Case(drawn[0], drawn[1], *drawn[2])) for name, strategy in categories(max_body_bytes).items()))


# --- the checker ----------------------------------------------------------------------------


def judge(case: Case, status: int, body: bytes, max_body_bytes: int) -> tuple[str, list[str]]:
    """The outcome of one answer (`400`, `allowed`, `patched`, `denied`, `internal-error`) and
    every way it breaks the contract (empty when it keeps it)."""
    problems: list[str] = []
    if status >= 500:
        problems.append(f"HTTP {status}")
    try:
        answer = json.loads(body)
    except ValueError:
        return f"http-{status}", [*problems, f"answer is not JSON: {body[:200]!r}"]
    if not isinstance(answer, dict):
        return f"http-{status}", [*problems, f"answer is a JSON {type(answer).__name__}, not an object"]
    uid = case.given_uid(max_body_bytes)
    if status == 400:
        error = answer.get("error")
        if not (isinstance(error, str) and error.strip()):
            problems.append(f"400 without an error message: {answer!r:.200}")
        elif uid is not None and uid not in error:
            problems.append(f"400 does not name the request uid {uid!r:.80}: {error!r:.200}")
        return "400", problems
    if status != 200:
        return f"http-{status}", [*problems, f"unexpected HTTP {status}: {answer!r:.200}"]
    response = answer.get("response")
    if answer.get("apiVersion") != API_VERSION or answer.get("kind") != KIND or not isinstance(response, dict):
        return "malformed", [*problems, f"200 that is not an AdmissionReview: {answer!r:.200}"]
    if uid is None or response.get("uid") != uid:
        problems.append(f"answer uid {response.get('uid')!r:.80} is not the request's {uid!r:.80}")
    if response.get("allowed") is True:
        if "patch" not in response:
            return "allowed", problems
        try:
            ops = json.loads(base64.b64decode(response["patch"], validate=True))
            assert response.get("patchType") == "JSONPatch" and isinstance(ops, list) and ops
        except (ValueError, AssertionError):
            problems.append(f"patch is not base64 of a non-empty JSON list: {response!r:.200}")
        return "patched", problems
    if response.get("allowed") is not False:
        return "malformed", [*problems, f"`allowed` is {response.get('allowed')!r}"]
    status_ = response.get("status") or {}
    message = status_.get("message") if isinstance(status_, dict) else None
    if not (isinstance(message, str) and message.strip()):
        problems.append(f"refusal without a message: {response!r:.200}")
    if isinstance(status_, dict) and status_.get("code") == 500:
        return "internal-error", [*problems, f"the policy crashed: {message!r:.200}"]
    return "denied", problems


# --- driving it -----------------------------------------------------------------------------

Send = Callable[[Case], tuple[int, bytes]]


def explore(send: Send, examples: int, max_body_bytes: int, seed: int | None = None) -> dict:
    """`examples` cases through `send`, without shrinking: counts per category and outcome, and
    the first few violations found."""
    tried: Counter = Counter()
    outcomes: Counter = Counter()
    violations: list[dict] = []

    @settings(max_examples=examples, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), derandomize=seed is None)
    @given(case=cases(max_body_bytes))
    def one(case: Case) -> None:
        status, body = send(case)
        outcome, problems = judge(case, status, body, max_body_bytes)
        tried[case.category] += 1
        outcomes[f"{case.category}:{outcome}"] += 1
        if problems and len(violations) < 20:
            violations.append({"category": case.category, "path": case.path, "problems": problems,
                               "body": case.body[:300].decode("utf-8", "replace")})

    (fixed_seed(seed)(one) if seed is not None else one)()
    return {"tried": dict(sorted(tried.items())), "outcomes": dict(sorted(outcomes.items())),
            "violations": violations, "total": sum(tried.values())}


def test_client_sender(client) -> Send:
    def send(case: Case) -> tuple[int, bytes]:
        headers = {"Content-Type": case.content_type} if case.content_type else {}
        answer = client.post(case.path, data=case.body, headers=headers)
        return answer.status_code, answer.get_data()

    return send


def tls_sender(port: int, ca_pem: bytes) -> Send:
    """POST over a fresh TLS connection, reading the answer even if the server stopped reading
    the body first (it refuses a declared oversize body without reading it)."""
    context = ssl.create_default_context(cadata=ca_pem.decode())

    def send(case: Case) -> tuple[int, bytes]:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as raw, \
                context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            head = f"POST {case.path} HTTP/1.1\r\nHost: webhook\r\nContent-Length: {len(case.body)}\r\n"
            if case.content_type:
                head += f"Content-Type: {case.content_type}\r\n"
            tls.sendall((head + "Connection: close\r\n\r\n").encode())
            try:
                tls.sendall(case.body)
            except OSError:
                pass
            answer = http.client.HTTPResponse(tls)
            answer.begin()
            return answer.status, answer.read()

    return send


def worker_pids(master: int) -> set[int]:
    """The gunicorn master's children, from /proc."""
    children = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == master:
                children.add(int(entry))
    return children


def wait_for_workers(master: int, count: int, timeout: float = 20) -> set[int]:
    """The master's workers once all `count` have started (readiness needs only the first)."""
    deadline = time.monotonic() + timeout
    while len(pids := worker_pids(master)) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids


def run(examples: int = 3000, server_examples: int = 300, seed: int | None = None) -> dict:
    """The full fuzz: `examples` cases through the Flask test client, then `server_examples`
    over HTTPS to gunicorn (2 gthread workers, the shipped settings), whose worker PIDs must be
    the same before and after."""
    from bench import webhook as bench
    from gangkeeper.webhook.app import create_app

    client = create_app({"MAX_BODY_BYTES": FUZZ_MAX_BODY_BYTES, "AUDIT_FILE": os.devnull}).test_client()
    results = {"in_process": explore(test_client_sender(client), examples, FUZZ_MAX_BODY_BYTES, seed)}
    if server_examples:
        with tempfile.TemporaryDirectory(prefix="gangkeeper-fuzz-") as workdir:
            ca_pem = bench._write_certificate(Path(workdir))
            server = bench.BenchServer(Path(workdir), "gthread", 2, 4)
            try:
                server.wait_ready(ca_pem)
                before = wait_for_workers(server.process.pid, 2)
                served = explore(tls_sender(server.port, ca_pem), server_examples, 3 * 2**20, seed)
                after = worker_pids(server.process.pid)
                served |= {"workers_before": sorted(before), "workers_after": sorted(after),
                           "workers_unchanged": bool(before) and before == after,
                           "master_alive": server.process.poll() is None}
            finally:
                server.stop()
        results["gunicorn_tls"] = served
    return results


def markdown(results: dict) -> str:
    """The figures of `run` as a section of bench/RESULTS.md."""
    lines = ["## Webhook under hostile input\n", "`bench/fuzz.py`: generated AdmissionReviews and bodies, by "
             "category, and what the webhook answered. Every answer must be JSON, never 5xx, echo the uid, "
             "and explain every 400 and every refusal.\n"]
    for where, figures in results.items():
        lines.append(f"### {where} ({figures['total']} requests, {len(figures['violations'])} violations)\n")
        lines.append("| category | tried | outcomes |\n|---|---|---|")
        for category, count in figures["tried"].items():
            outcomes = ", ".join(f"{key.split(':', 1)[1]} {value}" for key, value in figures["outcomes"].items()
                                 if key.startswith(category + ":"))
            lines.append(f"| {category} | {count} | {outcomes} |")
        if "workers_unchanged" in figures:
            lines.append(f"\nWorker PIDs before {figures['workers_before']}, after {figures['workers_after']}: "
                         f"{'unchanged' if figures['workers_unchanged'] else 'CHANGED'}; master "
                         f"{'alive' if figures['master_alive'] else 'DEAD'}.")
        for violation in figures["violations"]:
            lines.append(f"\n- {violation['category']} {violation['path']}: {'; '.join(violation['problems'])}")
        lines.append("")
    return "\n".join(lines)


def atheris_main(argv: list[str]) -> None:
    """Coverage-guided fuzzing of the same contract with atheris (libFuzzer), when installed:
    `python -m bench.fuzz --atheris -runs=20000 CORPUS_DIR`. Not part of `make test` or
    `make bench`: atheris is an optional extra. The corpus is seeded with well-formed reviews
    so that libFuzzer mutates AdmissionReviews rather than random bytes."""
    import atheris  # noqa: PLC0415 — optional

    with atheris.instrument_imports():
        from gangkeeper.webhook.app import create_app  # noqa: PLC0415
    import logging  # noqa: PLC0415

    logging.disable(logging.CRITICAL)
    client = create_app({"MAX_BODY_BYTES": FUZZ_MAX_BODY_BYTES, "AUDIT_FILE": os.devnull}).test_client()
    send = test_client_sender(client)
    corpus = [arg for arg in argv[1:] if not arg.startswith("-")]
    if corpus:
        seeds = Path(corpus[0])
        seeds.mkdir(parents=True, exist_ok=True)
        for index in range(8):
            (seeds / f"seed-{index}.json").write_bytes(_encode(reviews().example()))

    def one_input(data: bytes) -> None:
        for path in ("/mutate", "/validate"):
            case = Case("atheris", path, data)
            status, body = send(case)
            outcome, problems = judge(case, status, body, FUZZ_MAX_BODY_BYTES)
            if problems:
                raise AssertionError(f"{outcome}: {problems}")

    atheris.Setup(argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--atheris"]:
        atheris_main([sys.argv[0], *sys.argv[2:]])
    report = run(int(sys.argv[1]) if len(sys.argv) > 1 else 3000,
                 int(sys.argv[2]) if len(sys.argv) > 2 else 300)
    print(markdown(report))
    sys.exit(1 if any(figures["violations"] for figures in report.values()) else 0)
