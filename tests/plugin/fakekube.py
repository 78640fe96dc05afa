"""A stand-in for the controller's API adapter (`controller.reading.kube.Kube`) as the plugin
calls it: lists (each item through the transform the adapter applies), gets and discovery over
raw objects, and refusals raised as the adapter raises them (403 `Forbidden`, 404 `NotFound`)."""

import copy

from gangkeeper.controller.reading import kube as api


class FakeKube:
    """`forbidden` holds (verb, resource name, namespace or None for every namespace) refused;
    `unserved` the resource names discovery does not find."""

    def __init__(self, objects=(), *, forbidden=(), unserved=()):
        self.objects: dict[str, list[dict]] = {}
        for resource, obj in objects:
            self.objects.setdefault(resource.name, []).append(obj)
        self.forbidden = set(forbidden)
        self.unserved = set(unserved)

    def served(self, group, version, plural):
        return f"{plural}.{group}" not in self.unserved if group else True

    def list(self, resource, namespace=None, label_selector="", field_selector="", *, transform=None, reading=None):
        self._check("list", resource, namespace)
        fields = dict(term.split("=", 1) for term in field_selector.split(",") if term)
        items = [copy.deepcopy(obj) for obj in self.objects.get(resource.name, ())
                 if (namespace is None or obj["metadata"].get("namespace") == namespace)
                 and all(_field(obj, path) == value for path, value in fields.items())]
        if transform is not None:
            items = [kept for kept in map(transform, items) if kept is not None]
        return items, "1"

    def get(self, resource, namespace, name):
        self._check("get", resource, namespace)
        for obj in self.objects.get(resource.name, ()):
            if obj["metadata"]["name"] == name and obj["metadata"].get("namespace") == namespace:
                return copy.deepcopy(obj)
        raise api.NotFound(404, {"reason": "NotFound", "message": f'{resource.name} "{name}" not found'})

    def _check(self, verb, resource, namespace):
        if (verb, resource.name, namespace) in self.forbidden:
            where = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            raise api.Forbidden(403, {"reason": "Forbidden", "message": f'{resource.name} is forbidden: User "ada" '
                                                                         f'cannot {verb} resource {where}'})


def _field(obj, path):
    value = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value
