"""An object that declares a group's size, read into `model.objects.Workload` (the informers' transform)."""

import sys
from collections.abc import Mapping

from gangkeeper import integrations, names
from gangkeeper.controller.model.objects import Workload
from gangkeeper.controller.reading.pods import controller_owner


def workload_from_api(resource: str, obj: Mapping) -> Workload:
    """What an object declares, read the way its own controller reads its spec (its kind's integration).

    The API version and kind come from the resource watched, not from the object: a real API
    server lists built-in kinds (Jobs) without them on the items, and a Gang owned by a Job
    needs both in its ownerReference. Its `parent` is a Gang's `spec.parent`, or for any other
    kind its label `gangkeeper.io/parent` (its group's parent Gang)."""
    metadata = obj.get("metadata") or {}
    api, declaration = integrations.DECLARATIONS[resource]
    controller = controller_owner(metadata)
    declared = {"parent": (metadata.get("labels") or {}).get(names.PARENT_LABEL, ""), **declaration(obj)}
    return Workload(resource=resource, namespace=sys.intern(metadata.get("namespace", "")),
                    name=metadata.get("name", ""), uid=metadata.get("uid", ""),
                    api_version=f"{api.group}/{api.version}" if api.group else api.version,
                    kind=api.kind, resource_version=str(metadata.get("resourceVersion", "")),
                    controller_uid=controller.uid if controller is not None else "", **declared)
