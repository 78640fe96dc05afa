"""A node as the API writes it, read into `model.nodes.Node`: only what placement reads."""

import sys
from collections.abc import Mapping

from gangkeeper.controller.model.nodes import Node, Taint
from gangkeeper.quantity import parse_quantity
from gangkeeper.resources import as_scheduled


def node_from_api(obj: Mapping) -> Node:
    metadata = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    allocatable = as_scheduled({sys.intern(name): parse_quantity(value)
                                for name, value in (status.get("allocatable") or {}).items()})
    taints = tuple(Taint(t.get("key", ""), t.get("value", ""), t.get("effect", ""))
                   for t in spec.get("taints") or ())
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())
    return Node(metadata.get("name", ""), allocatable, dict(metadata.get("labels") or {}), taints,
                bool(spec.get("unschedulable")), ready)
