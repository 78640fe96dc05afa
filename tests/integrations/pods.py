"""Pods shaped the way each kind's operator creates them: labels and annotations always there,
a GPU limit or a CPU request (the rules read no spec but requests); built by `tests.builders`."""

from tests import builders


def pod(name="p", labels=None, annotations=None, owners=(), gpus=0):
    resources = {"gpus": gpus} if gpus else {"requests": {"cpu": "1"}}
    return builders.pod(name, labels=labels or {}, annotations=annotations or {}, owners=owners, **resources)


def owner(kind, name, uid, api_version="v1", controller=True):
    return builders.owner(kind, name, uid, api_version, controller)
