"""Status bodies exactly as the real API server writes them, and field errors for validation.

Clients branch on `reason` and `code`, people read `message`; both must match the real server,
so every refusal in the emulation is built here.
"""

import json
from dataclasses import dataclass

from sim.api import APIError
from sim.kinds import Kind


def status(code: int, reason: str, message: str, details: dict | None = None) -> dict:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason}
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def success(code: int = 200) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code}


def _details(kind: Kind, name: str, as_kind: str | None = None) -> dict:
    details = {"name": name}
    if kind.group:
        details["group"] = kind.group
    details["kind"] = as_kind or kind.plural
    return details


def not_found(kind: Kind, name: str) -> APIError:
    return APIError(status(404, "NotFound", f'{kind.qualified_resource} "{name}" not found', _details(kind, name)))


def already_exists(kind: Kind, name: str) -> APIError:
    return APIError(status(409, "AlreadyExists", f'{kind.qualified_resource} "{name}" already exists',
                           _details(kind, name)))


def conflict(kind: Kind, name: str, why: str, subresource: str = "") -> APIError:
    resource = f"{kind.qualified_resource}/{subresource}" if subresource else kind.qualified_resource
    details = _details(kind, name, f"{kind.plural}/{subresource}" if subresource else None)
    return APIError(status(409, "Conflict", f'Operation cannot be fulfilled on {resource} "{name}": {why}', details))


def stale(kind: Kind, name: str) -> APIError:
    return conflict(kind, name, "the object has been modified; please apply your changes to the latest version "
                                "and try again")


def bad_request(message: str) -> APIError:
    return APIError(status(400, "BadRequest", message))


def forbidden(group: str, resource: str, name: str, why: str) -> APIError:
    """`NewForbidden`: the resource as the request named it (an authorizer refuses before any kind is
    looked up), no name for a collection, and "forbidden: ..." when there is no resource at all (a
    path); empty details are left out, as their JSON tags say."""
    qualified = f"{resource}.{group}" if group else resource
    if not qualified:
        subject = "forbidden"
    elif name:
        subject = f'{qualified} "{name}" is forbidden'
    else:
        subject = f"{qualified} is forbidden"
    details = {key: value for key, value in (("name", name), ("group", group), ("kind", resource)) if value}
    return APIError(status(403, "Forbidden", f"{subject}: {why}", details))


def method_not_allowed(verb: str) -> APIError:
    return APIError(status(405, "MethodNotAllowed", f"the server does not allow this method on the requested "
                                                    f"resource ({verb})", {}))


def unsupported_media_type(content_type: str) -> APIError:
    return APIError(status(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - "
                                                        f"accepted media types include: {content_type}", {}))


def patch_rejected() -> APIError:
    """A JSON Patch that cannot be applied, including a failed `test`: the server says no more than this."""
    return APIError(status(422, "Invalid", "the server rejected our request due to an error in our request", {}))


def gone(message: str) -> APIError:
    return APIError(status(410, "Expired", message))


def unauthorized() -> APIError:
    return APIError(status(401, "Unauthorized", "Unauthorized"))


def internal(message: str) -> APIError:
    return APIError(status(500, "InternalError", f"Internal error occurred: {message}",
                           {"causes": [{"message": message}]}))


def page_not_found() -> APIError:
    """What the real server answers for a path it does not serve (an unknown resource or group)."""
    return APIError(status(404, "NotFound", "the server could not find the requested resource",
                           {"causes": [{"reason": "UnexpectedServerResponse", "message": "404 page not found"}]}))


@dataclass(frozen=True)
class FieldError:
    """One `field.Error` of the Go validation library: where, what kind of problem, and why."""

    field: str
    type: str  # Forbidden, Invalid, Required, Duplicate, NotSupported, TooLong, TooMany
    detail: str = ""
    value: object = None

    _REASONS = {"Forbidden": "FieldValueForbidden", "Invalid": "FieldValueInvalid", "Required": "FieldValueRequired",
                "Duplicate": "FieldValueDuplicate", "NotSupported": "FieldValueNotSupported",
                "TooLong": "FieldValueTooLong", "TooMany": "FieldValueTooMany"}
    _WITHOUT_VALUE = {"Forbidden": "Forbidden", "Required": "Required value", "TooLong": "Too long"}

    def body(self) -> str:
        """The `ErrorBody()` text: the kind of problem, the bad value where the Go library prints one, the detail."""
        if self.type in self._WITHOUT_VALUE:
            text = self._WITHOUT_VALUE[self.type]
            return f"{text}: {self.detail}" if self.detail else text
        if self.type == "Duplicate":
            return f"Duplicate value: {go_value(self.value)}"
        if self.type == "NotSupported":
            return f"Unsupported value: {go_value(self.value)}: supported values: {self.detail}"
        if self.type == "TooMany":
            return f"Too many: {go_value(self.value)}: {self.detail}"
        return f"Invalid value: {go_value(self.value)}: {self.detail}"

    def cause(self) -> dict:
        return {"reason": self._REASONS[self.type], "message": self.body(), "field": self.field}

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def go_value(value: object) -> str:
    """A bad value as `field.Invalid` prints it: strings quoted, numbers bare, structs as JSON."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def invalid(kind: Kind, name: str, errors: list[FieldError]) -> APIError:
    """422 Invalid, the message listing every error as `errs.ToAggregate()` does."""
    text = str(errors[0]) if len(errors) == 1 else "[" + ", ".join(str(e) for e in errors) + "]"
    details = {"name": name}
    if kind.group:
        details["group"] = kind.group
    details["kind"] = kind.kind
    details["causes"] = [e.cause() for e in errors]
    return APIError(status(422, "Invalid", f'{kind.qualified_kind} "{name}" is invalid: {text}', details))
