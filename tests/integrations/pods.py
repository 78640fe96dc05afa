"""Pods shaped the way each kind's operator creates them (metadata only: rules read no spec but requests)."""


def pod(name="p", labels=None, annotations=None, owners=(), gpus=0):
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {"requests": {"cpu": "1"}}
    metadata = {"name": name, "namespace": "ml", "labels": dict(labels or {}), "annotations": dict(annotations or {})}
    if owners:
        metadata["ownerReferences"] = list(owners)
    return {"metadata": metadata, "spec": {"containers": [{"name": "main", "resources": resources}]}}


def owner(kind, name, uid, api_version="v1", controller=True):
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": controller}
