"""HTTP transport of the webhook: a Flask app whose views read the body, call the policy, answer.

Two error channels, as the API server expects them. A request that is not a well-formed
AdmissionReview (empty, too large, not JSON, wrong content type, no uid) is an HTTP 400 with
`{"error": …}` saying what was wrong. Anything else is answered with HTTP 200 and an
AdmissionReview: a policy bug becomes `allowed: false` with status 500 and a message (the
webhook fails closed, and the API server shows the message), never an HTTP 500 or a dead worker.
"""

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO

import orjson
from flask import Blueprint, Flask, Response, current_app, request
from werkzeug.exceptions import HTTPException

from gangkeeper import names
from gangkeeper.audit import AuditLog, open_audit_log
from gangkeeper.identity import placeholder_for
from gangkeeper.webhook import metrics
from gangkeeper.webhook.mutate import mutate
from gangkeeper.webhook.policy import Policy
from gangkeeper.webhook.review import AdmissionRequest, ReviewError, allowed, denied, errored, parse_review, patched
from gangkeeper.webhook.shapes import mutate_review
from gangkeeper.webhook.validate import validate

log = logging.getLogger("gangkeeper.webhook")

DEFAULTS = {
    "EXCLUDED_NAMESPACES": (names.DEFAULT_NAMESPACE,),
    "ACCELERATORS": names.DEFAULT_ACCELERATORS,
    "CONTROLLER_USERNAME": names.DEFAULT_CONTROLLER_USERNAME,
    "MAX_BODY_BYTES": 3 * 2**20,
    "AUDIT_FILE": "",
}
_EXTENSION = "gangkeeper.webhook"
_CHUNK_BYTES = 64 * 1024


class TransportError(ValueError):
    """The HTTP request cannot carry an AdmissionReview."""


@dataclass(frozen=True)
class State:
    policy: Policy
    audit: AuditLog
    max_body_bytes: int


def create_app(config: Mapping | None = None) -> Flask:
    app = Flask(__name__)
    app.config.from_mapping(DEFAULTS)
    app.config.from_mapping(config or {})
    policy = Policy(excluded_namespaces=frozenset(app.config["EXCLUDED_NAMESPACES"]),
                    accelerator_patterns=tuple(app.config["ACCELERATORS"]),
                    controller_username=app.config["CONTROLLER_USERNAME"])
    app.extensions[_EXTENSION] = State(policy, open_audit_log("webhook", app.config["AUDIT_FILE"]),
                                       int(app.config["MAX_BODY_BYTES"]))
    app.register_blueprint(blueprint)
    app.register_error_handler(HTTPException, _http_error)
    return app


blueprint = Blueprint("webhook", __name__)


@blueprint.post("/mutate")
def mutate_view() -> Response:
    return _admit("mutate", mutate_review, _answer_mutate)


@blueprint.post("/validate")
def validate_view() -> Response:
    return _admit("validate", orjson.loads, _answer_validate)


@blueprint.get("/healthz")
@blueprint.get("/readyz")
def health_view() -> Response:
    return Response("ok\n", mimetype="text/plain")


@blueprint.get("/metrics")
def metrics_view() -> Response:
    body, content_type = metrics.exposition()
    return Response(body, content_type=content_type)


Answer = Callable[[AdmissionRequest, State], tuple[dict, str]]
# JSON bytes to the document: the whole of it, or what the endpoint reads of it (webhook.shapes).
Decode = Callable[[bytes], object]


def _admit(endpoint: str, decode: Decode, answer: Answer) -> Response:
    started = time.perf_counter()
    state: State = current_app.extensions[_EXTENSION]
    try:
        review_request = parse_review(_read_json(state.max_body_bytes, decode))
    except (TransportError, ReviewError) as error:
        log.warning("%s: bad request from %s: %s", endpoint, request.remote_addr, error)
        metrics.observe(endpoint, "error", time.perf_counter() - started)
        return _json({"error": str(error)}, 400)
    try:
        review, decision = answer(review_request, state)
    except Exception as error:  # a policy bug must not become a crashed worker or an HTTP 500
        log.exception("%s: internal error answering request uid %s", endpoint, review_request.uid)
        review, decision = errored(review_request.uid, f"gangkeeper webhook internal error in /{endpoint} "
                                                       f"({type(error).__name__}); see the webhook log"), "error"
    metrics.observe(endpoint, decision, time.perf_counter() - started)
    return _json(review, 200)


def _read_json(max_bytes: int, decode: Decode) -> object:
    """The body as JSON, refused before parsing when it cannot be an AdmissionReview."""
    body = read_body(max_bytes)
    try:
        return decode(body)
    except (orjson.JSONDecodeError, RecursionError) as error:
        raise TransportError(f"body is not valid JSON: {error}") from None


def read_body(max_bytes: int) -> bytes:
    """The raw body, refused when it cannot carry an AdmissionReview."""
    if request.mimetype != "application/json":
        raise TransportError(f"Content-Type must be application/json, got {request.content_type or 'none'!r}")
    length = request.content_length
    if length is not None and length > max_bytes:
        raise TransportError(f"body of {length} bytes is over the limit of {max_bytes} bytes")
    body = _read_at_most(request.stream, max_bytes + 1 if length is None else min(length, max_bytes + 1))
    if len(body) > max_bytes:
        raise TransportError(f"body is over the limit of {max_bytes} bytes")
    if not body:
        raise TransportError("empty body: expected an AdmissionReview")
    return body


def _read_at_most(stream: IO[bytes], limit: int) -> bytes:
    """Up to `limit` bytes, in chunks: one `read(limit)` would allocate (and zero) the whole
    limit, 3 MiB, for every 6 KB request."""
    chunks, size = [], 0
    while size < limit:
        chunk = stream.read(min(_CHUNK_BYTES, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _answer_mutate(review_request: AdmissionRequest, state: State) -> tuple[dict, str]:
    mutation = mutate(review_request, state.policy)
    if mutation.unexpected:
        log.warning("mutate: request uid %s: %s", review_request.uid, mutation.reason)
    _audit(state, "admission.mutate", review_request, mutation.decision, mutation.reason, mutation.group,
           {"source": mutation.source, "ops": len(mutation.ops)})
    if mutation.ops:
        return patched(review_request.uid, mutation.ops), mutation.decision
    return allowed(review_request.uid), mutation.decision


def _answer_validate(review_request: AdmissionRequest, state: State) -> tuple[dict, str]:
    verdict = validate(review_request, state.policy)
    decision = "allowed" if verdict.allowed else "denied"
    obj = review_request.object or {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    # A placeholder's line names the group it holds capacity for.
    group = str(labels.get(names.GROUP_LABEL) or placeholder_for(obj) or "")
    _audit(state, "admission.validate", review_request, decision, verdict.reason if verdict.allowed else verdict.message,
           group, {"problems": len(verdict.problems), "warnings": len(verdict.warnings)})
    if verdict.allowed:
        return allowed(review_request.uid, verdict.warnings), decision
    return denied(review_request.uid, verdict.message, warnings=verdict.warnings), decision


def _audit(state: State, event: str, review_request: AdmissionRequest, decision: str, reason: str, group: str,
           details: dict) -> None:
    state.audit.record(event, decision=decision, reason=reason, namespace=review_request.namespace, group=group,
                       pod=review_request.pod_name, uid=review_request.uid, user=review_request.username,
                       details={"kind": review_request.kind, "operation": review_request.operation,
                                "dry_run": review_request.dry_run, **details})


def _http_error(error: HTTPException) -> Response:
    return _json({"error": f"{error.code} {error.name}: {error.description}"}, error.code or 500)


def _json(document: object, status: int) -> Response:
    return Response(orjson.dumps(document), status=status, mimetype="application/json")
