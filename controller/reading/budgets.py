"""A PodDisruptionBudget, read into `model.objects.Budget` (the informers' transform)."""

from collections.abc import Mapping

from gangkeeper.controller.model.objects import Budget
from gangkeeper.controller.reading.selectors import selector_from_api


def budget_from_api(obj: Mapping) -> Budget:
    """A policy/v1 PodDisruptionBudget. A budget the disruption controller has not counted yet
    allows nothing (its status is missing or zero, as the Eviction API reads it)."""
    metadata = obj.get("metadata") or {}
    allowed = (obj.get("status") or {}).get("disruptionsAllowed")
    return Budget(metadata.get("namespace", ""), metadata.get("name", ""),
                  selector_from_api((obj.get("spec") or {}).get("selector")),
                  allowed if isinstance(allowed, int) and allowed > 0 else 0)
