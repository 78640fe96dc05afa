"""What a kind's rule finds on a pod: its group, under a name that is a valid label value.

Every integration's rule answers with a `Classification` built here, so the webhook writes the
same label and source annotation whichever kind found the group. Derived names carry the
owner's UID so that two jobs of the same name, one deleted and one re-created, never share a
group; a name that would be too long is shortened deterministically with a hash of the whole
name (group names are label values, at most 63 characters).
"""

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass

LABEL_VALUE_MAX = 63
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_HASH_CHARS = 10
LABEL_VALUE_RULE = (
    "at most 63 characters: letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
)
# A label key (k8s.io/apimachinery validation.IsQualifiedName): a name like a label value but never
# empty, after an optional prefix that is a lowercase DNS subdomain and a '/'.
LABEL_KEY_PREFIX_MAX = 253
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_KEY_RULE = (
    "a label key such as topology.kubernetes.io/zone: an optional prefix (a lowercase DNS subdomain of at most "
    "253 characters) and '/', then a name of at most 63 characters: letters, digits, '-', '_' or '.', starting "
    "and ending with a letter or digit"
)


@dataclass(frozen=True)
class GroupIdentity:
    """A pod's group: the value of the group label, and how it was found."""

    name: str
    source: str


@dataclass(frozen=True)
class Classification:
    """The webhook's view of one pod: its group, or why gangkeeper leaves it alone."""

    identity: GroupIdentity | None
    reason: str

    @property
    def is_member(self) -> bool:
        return self.identity is not None


def is_valid_label_value(value: object) -> bool:
    # fullmatch: `$` alone would also accept a value ending in a newline.
    return isinstance(value, str) and len(value) <= LABEL_VALUE_MAX and bool(_LABEL_VALUE.fullmatch(value))


def is_valid_label_key(value: object) -> bool:
    """Whether `value` is a label key the API server accepts (LABEL_KEY_RULE)."""
    if not isinstance(value, str):
        return False
    prefix, slash, name = value.rpartition("/")
    if slash and not (0 < len(prefix) <= LABEL_KEY_PREFIX_MAX and _DNS_SUBDOMAIN.fullmatch(prefix)):
        return False
    return bool(name) and is_valid_label_value(name)


def to_label_value(text: str) -> str:
    """`text` as a valid label value; unchanged when it already is one.

    A name that is too long or has characters a label value may not hold keeps a readable
    prefix and gets `-` plus a hash of the whole text, so two different names never meet.
    """
    if is_valid_label_value(text) and text:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:_HASH_CHARS]
    readable = re.sub(r"[^-A-Za-z0-9_.]", "-", text)[: LABEL_VALUE_MAX - _HASH_CHARS - 1]
    readable = readable.strip("-_.")
    readable = re.sub(r"^[^A-Za-z0-9]+", "", readable)
    return f"{readable}-{digest}" if readable else digest


def found(name: str, source: str, how: str) -> Classification:
    """A derived group: `name` made a label value, so every member writes the same one."""
    return Classification(GroupIdentity(to_label_value(name), source), how)


def labels_and_annotations(pod: Mapping) -> tuple[Mapping, Mapping]:
    metadata = pod.get("metadata") or {}
    return metadata.get("labels") or {}, metadata.get("annotations") or {}


def controlling_owner(pod: Mapping, kind: str) -> Mapping | None:
    """The ownerReference of `kind` that controls the pod: only that owner's pods carry its group."""
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(owner, dict) and owner.get("kind") == kind and owner.get("controller"):
            return owner
    return None


def named_by(pod: Mapping, where: str, key: str, source: str) -> Classification | None:
    """The group a pod names in its label or annotation `key` (`where`: "label" or "annotation")."""
    labels, annotations = labels_and_annotations(pod)
    value = (labels if where == "label" else annotations).get(key)
    return found(value, source, f"{where} {key}") if value else None


def index_of(text: str | None) -> int | None:
    """An index as a workload's controller writes it (decimal digits); None for anything else."""
    return int(text) if isinstance(text, str) and text.isascii() and text.isdigit() and len(text) <= 12 else None
