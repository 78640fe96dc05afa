"""Which devices a request may take: those its DeviceClass's selectors and then its own select
(CEL, `checks.dra.cel`) and its tolerations allow, of the kinds the model chooses at all.

What CEL said of a device shape, and which devices of a sequence of shapes a request may take,
is knowledge, not state: an inventory and its copies share one `Matching` for good, so that the
same question on another node with devices of the same shapes in the same order costs a look-up.
"""

from collections.abc import Container

from gangkeeper.controller.checks.dra.cel import Broken, Cel, SelectorSet
from gangkeeper.controller.checks.dra.devices import Device, DeviceClass, NodeDevices, Shapes
from gangkeeper.controller.checks.eligibility import tolerates
from gangkeeper.controller.model.claims import ALL, DeviceKey, DeviceRequest

_BLOCKING_TAINTS = frozenset({"NoSchedule", "NoExecute"})


class Matching:
    """The device shapes seen, what CEL said of them, and the matching positions per sequence of shapes."""

    __slots__ = ("cel", "shapes", "_matching")

    def __init__(self) -> None:
        self.cel = Cel()
        self.shapes = Shapes()
        self._matching: dict[tuple, tuple[int, ...] | Broken] = {}  # (shapes, selectors, tolerations) → positions

    def candidates(self, cls: DeviceClass, request: DeviceRequest, devices: NodeDevices,
                   busy: Container[DeviceKey]) -> list[int] | str:
        """Positions of the devices the request may take (All: busy ones too), or a CEL error."""
        if request.mode == ALL and devices.problems:
            return f"asks for all devices, but {devices.problems[0]}"
        matching = self.matching_of(cls, request, devices)
        listed = devices.devices
        if isinstance(matching, Broken):
            return f"{matching.reason} on device {'/'.join(listed[matching.position].key)}"
        if request.mode == ALL or request.admin_access:
            return list(matching)
        return [position for position in matching if listed[position].key not in busy]

    def matching_of(self, cls: DeviceClass, request: DeviceRequest, devices: NodeDevices) -> tuple[int, ...] | Broken:
        """`_matching_positions`, remembered per sequence of device shapes."""
        selectors = self.cel.selector_set(cls.name, cls.selectors, request.selectors)
        key = (devices.shapes, selectors, request.tolerations)
        matching = self._matching.get(key)
        if matching is None:
            matching = self._matching[key] = self._matching_positions(selectors, request, devices)
        return matching

    def selectable(self, cls: DeviceClass, request: DeviceRequest, device: Device) -> bool:
        return self._match(cls, request.selectors, device) is True and self.allocatable(device, request)

    def allocatable(self, device: Device, request: DeviceRequest) -> bool:
        shape = self.shapes.shapes[device.shape]
        if shape.refused:
            return False
        if not shape.taints:
            return True
        return not any(taint.effect in _BLOCKING_TAINTS and not any(tolerates(t, taint) for t in request.tolerations)
                       for taint in shape.taints)

    def _matching_positions(self, selectors: SelectorSet, request: DeviceRequest,
                            devices: NodeDevices) -> tuple[int, ...] | Broken:
        """The positions of the devices the request's class and selectors match and its
        tolerations allow, in use or not: the same on every node whose devices have these shapes
        in this order, so it is worked out once per such order (where a selector breaks, the
        first broken device's position)."""
        positions = []
        shapes = self.shapes.shapes
        for position, device in enumerate(devices.devices):
            answer = selectors.by_shape.get(device.shape)
            if answer is None:
                answer = selectors.match(device.shape, shapes[device.shape])
            if answer.__class__ is Broken:
                return Broken(answer.reason, position)
            if answer and self.allocatable(device, request):
                positions.append(position)
        return tuple(positions)

    def _match(self, cls: DeviceClass, selectors: tuple[str, ...], device: Device) -> bool | Broken:
        selector_set = self.cel.selector_set(cls.name, cls.selectors, selectors)
        return selector_set.match(device.shape, self.shapes.shapes[device.shape])
