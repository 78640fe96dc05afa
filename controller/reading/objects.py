"""The objects the checks read whole — DeviceClasses, ResourceSlices, ResourceClaims and their
templates, PersistentVolumeClaims and PersistentVolumes (`cache.occupancy.RESOURCES`): the
informers keep them as the API sends them, less what no one reads."""

from collections.abc import Mapping


def cached_object(obj: Mapping) -> dict:
    """What the informers keep of a device class, slice, claim, template or volume: all but managedFields."""
    metadata = {key: value for key, value in (obj.get("metadata") or {}).items() if key != "managedFields"}
    return {**obj, "metadata": metadata}
