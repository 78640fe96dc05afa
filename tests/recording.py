"""Reading through a shape, watched: a dict that notes every key read of it that its shape does
not name. Tests of the controller's informers (`controller.reading.shapes`) and of the webhook's
/mutate (`webhook.shapes`) hold what each reads to its shape with it."""

import glob
import json
import types
import typing
from pathlib import Path

from tests.recorded import FIXTURES


class Recorded(dict):
    """A dict that notes, in `reads`, every key read of it that its shape does not name.

    Children the shape describes (a TypedDict, a list of them) are recorded too; a key the shape
    types `Any` is kept whole, so what lies below it is not watched. Walking all the keys of a
    shaped level (`items()`, iteration) reads keys the shape may not name: noted as `*`."""

    def __init__(self, value: dict, shape: type, path: str, reads: set):
        super().__init__(value)
        self._fields, self._path, self._reads = typing.get_type_hints(shape), path, reads

    def _child(self, key, value):
        kind = self._fields.get(key)
        if kind is None:
            self._reads.add(f"{self._path}.{key}")
            return value
        return watched(value, kind, f"{self._path}.{key}", self._reads)

    def get(self, key, default=None):
        return self._child(key, super().get(key, default))

    def __getitem__(self, key):
        return self._child(key, super().__getitem__(key))

    def __contains__(self, key):
        self._child(key, None)
        return super().__contains__(key)

    def _everything(self):
        self._reads.add(f"{self._path}.*")

    def keys(self):
        self._everything()
        return super().keys()

    def items(self):
        self._everything()
        return super().items()

    def values(self):
        self._everything()
        return super().values()

    def __iter__(self):
        self._everything()
        return super().__iter__()


def watched(value, kind, path, reads):
    if typing.get_origin(kind) in (typing.Union, types.UnionType):  # a shape or null: the shape
        (kind,) = [choice for choice in typing.get_args(kind) if choice is not type(None)]
    if typing.is_typeddict(kind) and isinstance(value, dict):
        return Recorded(value, kind, path, reads)
    if typing.get_origin(kind) is list and isinstance(value, list):
        (item,) = typing.get_args(kind)
        return [watched(element, item, f"{path}[]", reads) for element in value]
    return value


def recorded_objects(kind):
    """Every object of `kind` in the recordings of a real control plane (scheduler cases, admission reviews)."""
    found = []

    def walk(value):
        if isinstance(value, dict):
            if value.get("kind") == kind and isinstance(value.get("metadata"), dict):
                found.append(value)
            for child in value.values():
                walk(child)
        elif isinstance(value, list):
            for child in value:
                walk(child)

    for path in sorted(glob.glob(str(FIXTURES / "**" / "*.json"), recursive=True)):
        walk(json.loads(Path(path).read_text()))
    return found
