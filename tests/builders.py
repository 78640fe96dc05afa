"""The one pod builder of the tests: a pod manifest, with what a scenario is about said by name.

`pod` builds what a client sends (and, given `uid`, `created` or `phase`, what a server stored).
Builders that read like the domain (`pytorchjob_pod`, `gpu_pod`, a member of a group) stay beside
their tests, each a few lines that say what is particular to it and build through `pod`. What is
not a plain pod manifest (a recorded pod, a model `Member`, a table row) is built where it is used.
"""

GPU = "nvidia.com/gpu"
IMAGE = "registry.example.com/train:1"


def container(name: str = "main", *, requests: dict | None = None, limits: dict | None = None, gpus: int = 0,
              image: str = IMAGE, **fields) -> dict:
    """A container asking for `requests` and `limits`; `gpus` are limited, and requested too when
    requests are given (what the API server's defaulting would make of a limit alone)."""
    if gpus:
        limits = {**(limits or {}), GPU: str(gpus)}
        requests = None if requests is None else {**requests, GPU: str(gpus)}
    resources = {key: dict(value) for key, value in (("requests", requests), ("limits", limits)) if value is not None}
    body = {"name": name, "image": image, **fields}
    if resources:
        body["resources"] = resources
    return body


def pod(name: str | None = "p", *, namespace: str | None = "ml", labels: dict | None = None,
        annotations: dict | None = None, owners=(), gates=(), node_name: str | None = None, phase: str | None = None,
        requests: dict | None = None, limits: dict | None = None, gpus: int = 0, containers: list | None = None,
        uid: str | None = None, created: str | None = None, generate_name: str | None = None, **spec) -> dict:
    """A pod of one container `main` (`requests`, `limits`, `gpus`: `container`'s), unless
    `containers` are given; `**spec` is the rest of its spec, as written. `labels` and
    `annotations` are left out unless given (an empty map is given), `namespace` too when None."""
    metadata: dict = {}
    for key, value in (("name", name), ("generateName", generate_name), ("namespace", namespace), ("uid", uid),
                       ("creationTimestamp", created)):
        if value:
            metadata[key] = value
    if labels is not None:
        metadata["labels"] = dict(labels)
    if annotations is not None:
        metadata["annotations"] = dict(annotations)
    if owners:
        metadata["ownerReferences"] = [dict(reference) for reference in owners]
    body_spec = {"containers": containers if containers is not None else
                 [container(requests=requests, limits=limits, gpus=gpus)], **spec}
    if gates:
        body_spec["schedulingGates"] = [{"name": gate} for gate in gates]
    if node_name:
        body_spec["nodeName"] = node_name
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body_spec}
    if phase:
        body["status"] = {"phase": phase}
    return body


def owner(kind: str, name: str, uid: str, api_version: str = "v1", controller: bool = True) -> dict:
    """An owner reference, controlling unless said otherwise, as an operator sets it on the pods it creates."""
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": controller,
            "blockOwnerDeletion": True}
