"""Label and field selectors, parsed with the real server's grammar and error messages.

The parser follows `k8s.io/apimachinery/pkg/labels` token by token, because clients and people
see its messages verbatim in a 400 answer.
"""

import re
from dataclasses import dataclass

from sim.kinds import Kind
from sim.status import bad_request

_SPECIAL = "=!(),<>"
_OPERATORS = {"!=": "!=", "==": "==", "=": "=", "!": "!", "(": "(", ")": ")", ",": ",", ">": ">", "<": "<"}
_KEYWORDS = {"in": "in", "notin": "notin"}
_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"
_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_INT64 = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # =, ==, !=, in, notin, exists, !, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: dict) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator in ("=", "==", "in"):
            return present and value in self.values
        if self.operator in ("!=", "notin"):
            return not present or value not in self.values
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        have, bound = parse_int64(value), parse_int64(self.values[0])
        if not present or have is None or bound is None:
            return False
        return have > bound if self.operator == "gt" else have < bound

    def equality(self) -> tuple[str, str] | None:
        """(key, value) when the requirement pins one value, so an index can answer it."""
        if self.operator in ("=", "==") or (self.operator == "in" and len(self.values) == 1):
            return self.key, self.values[0]
        return None


def _tokens(text: str) -> list[tuple[str, str]]:
    """(token type, literal) pairs; types: identifier, an operator symbol, in, notin, end."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in _SPECIAL:
            symbol = text[i:i + 2] if text[i:i + 2] in ("!=", "==") else ch
            out.append((_OPERATORS[symbol], symbol))
            i += len(symbol)
        else:
            j = i
            while j < len(text) and not text[j].isspace() and text[j] not in _SPECIAL:
                j += 1
            word = text[i:j]
            out.append((_KEYWORDS.get(word, "identifier"), word))
            i = j
    out.append(("end", ""))
    return out


class _LabelParser:
    def __init__(self, text: str):
        self.tokens = _tokens(text)
        self.pos = 0

    def peek(self, values: bool = True) -> tuple[str, str]:
        kind, literal = self.tokens[self.pos]
        if values and kind in ("in", "notin"):
            kind = "identifier"
        return kind, literal

    def take(self, values: bool = True) -> tuple[str, str]:
        token = self.peek(values)
        self.pos += 1
        return token

    def parse(self) -> list[Requirement]:
        requirements = []
        while True:
            kind, literal = self.peek()
            if kind == "end":
                return requirements
            if kind not in ("identifier", "!"):
                raise ValueError(f"found '{literal}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self.requirement())
            except ValueError as e:
                raise ValueError(f"unable to parse requirement: {e}") from None
            kind, literal = self.take()
            if kind == "end":
                return requirements
            if kind != ",":
                raise ValueError(f"found '{literal}', expected: ',' or 'end of string'")
            after, after_literal = self.peek()
            if after not in ("identifier", "!"):
                raise ValueError(f"found '{after_literal}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        negated = self.peek()[0] == "!"
        if negated:
            self.take()
        kind, key = self.take()
        if kind != "identifier":
            raise ValueError(f"found '{key}', expected: identifier")
        _check_key(key)
        if self.peek()[0] in ("end", ","):
            return Requirement(key, "!" if negated else "exists")
        if negated:
            return Requirement(key, "!")
        operator = self.operator()
        values = self.set_values() if operator in ("in", "notin") else self.exact_value()
        if operator in ("gt", "lt") and parse_int64(values[0]) is None:
            raise ValueError(f"values[0]: Invalid value: \"{values[0]}\": for 'Gt', 'Lt' operators, the value must be an "
                             "integer")
        for value in values:
            _check_value(value)
        return Requirement(key, operator, tuple(sorted(set(values))))

    def operator(self) -> str:
        kind, literal = self.take(values=False)
        if kind in ("in", "notin", "=", "==", "!="):
            return kind
        if kind == ">":
            return "gt"
        if kind == "<":
            return "lt"
        raise ValueError(f"found '{literal}', expected: {_BINARY_OPERATORS}")

    def exact_value(self) -> list[str]:
        if self.peek()[0] in ("end", ","):
            return [""]
        kind, literal = self.take()
        if kind == "identifier":
            return [literal]
        raise ValueError(f"found '{literal}', expected: identifier")

    def set_values(self) -> list[str]:
        kind, literal = self.take()
        if kind != "(":
            raise ValueError(f"found '{literal}' expected: '('")
        kind, literal = self.peek()
        if kind == ")":
            self.take()
            return [""]
        if kind not in ("identifier", ","):
            raise ValueError(f"found '{literal}', expected: ',', ')' or identifier")
        values = self.identifiers()
        kind, literal = self.take()
        if kind != ")":
            raise ValueError(f"found '{literal}', expected: ')'")
        return values

    def identifiers(self) -> list[str]:
        values: list[str] = []
        while True:
            kind, literal = self.take()
            if kind == "identifier":
                values.append(literal)
                after, after_literal = self.peek()
                if after == ")":
                    return values
                if after != ",":
                    raise ValueError(f"found '{after_literal}', expected: ',' or ')'")
            elif kind == ",":
                if not values:
                    values.append("")
                after = self.peek()[0]
                if after == ")":
                    values.append("")
                    return values
                if after == ",":
                    self.take()
                    values.append("")
            else:
                raise ValueError(f"found '{literal}', expected: ',', or identifier")


def is_label_key(key: str) -> bool:
    """A qualified name: an optional DNS-subdomain prefix of at most 253 characters and `/`, then a
    name of at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit."""
    return isinstance(key, str) and _key_prefix_valid(key) and _key_name_valid(key)


def is_label_value(value: str) -> bool:
    """Empty, or at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit."""
    return isinstance(value, str) and (not value or (len(value) <= 63 and bool(_NAME.match(value))))


def parse_int64(text: str) -> int | None:
    """Go's `strconv.ParseInt(text, 10, 64)`: an optional sign and ASCII digits, nothing else (no
    space, no '_'), within int64; None when it fails."""
    if not isinstance(text, str) or not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _key_prefix_valid(key: str) -> bool:
    prefix, slash, _ = key.rpartition("/")
    return not slash or (0 < len(prefix) <= 253 and bool(_DNS_SUBDOMAIN.match(prefix)))


def _key_name_valid(key: str) -> bool:
    name = key.rpartition("/")[2]
    return 0 < len(name) <= 63 and bool(_NAME.match(name))


def _check_key(key: str) -> None:
    if not _key_prefix_valid(key):
        raise ValueError(f"key: Invalid value: {key!r}: prefix part a lowercase RFC 1123 subdomain must consist of "
                         "lower case alphanumeric characters, '-' or '.', and must start and end with an "
                         "alphanumeric character")
    if not _key_name_valid(key):
        raise ValueError(f"key: Invalid value: \"{key}\": name part must consist of alphanumeric characters, '-', "
                         "'_' or '.', and must start and end with an alphanumeric character")


def _check_value(value: str) -> None:
    if not is_label_value(value):
        raise ValueError(f"values[0][{value}]: Invalid value: \"{value}\": a valid label must be an empty string or "
                         "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                         "alphanumeric character")


def parse_labels(text: str) -> list[Requirement]:
    """Requirements of a `labelSelector`; a malformed one is a 400 with the real parser's message."""
    try:
        return _LabelParser(text).parse()
    except ValueError as e:
        raise bad_request(str(e)) from None


def matches(requirements: list[Requirement], labels: dict | None) -> bool:
    labels = labels or {}
    return all(r.matches(labels) for r in requirements)


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    value: str
    negated: bool

    def matches(self, obj: dict) -> bool:
        return (field_value(obj, self.field) == self.value) != self.negated


FIELDS = {"pods": ("metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"),
          # core/v1 Events' field labels (`kubectl describe` selects by involvedObject.{name,namespace,kind,uid})
          "events": ("metadata.name", "metadata.namespace", "involvedObject.kind", "involvedObject.namespace",
                     "involvedObject.name", "involvedObject.uid", "involvedObject.apiVersion",
                     "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason", "reportingComponent",
                     "source", "type")}
_FIELD_PATHS = {("events", "source"): "source.component"}  # a field label that is not its object path
_DEFAULT_FIELDS = ("metadata.name", "metadata.namespace")


def field_value(obj: dict, path: str) -> str:
    """A selectable field, `""` when unset, as the server's field label functions give it."""
    node = obj
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node if isinstance(node, str) else ""


def parse_fields(text: str, kind: Kind, label_selector: str = "") -> list[FieldRequirement]:
    """Requirements of a `fieldSelector`: `=`, `==` and `!=` over the fields the resource can select on."""
    out = []
    for term in (t for t in text.split(",") if t):
        for operator in ("!=", "==", "="):
            if operator in term:
                field, value = term.split(operator, 1)
                break
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        if field not in FIELDS.get(kind.plural, _DEFAULT_FIELDS):
            raise bad_request(f'Unable to find "{kind.group}/{kind.version}, Resource={kind.plural}" that match label '
                              f'selector "{label_selector}", field selector "{text}": field label not supported: {field}')
        out.append(FieldRequirement(_FIELD_PATHS.get((kind.plural, field), field), value, operator == "!="))
    return out
