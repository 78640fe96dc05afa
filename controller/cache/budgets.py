"""PodDisruptionBudgets as preemption weighs them (docs/design.md, "Preemption").

gangkeeper evicts lone pods through the Eviction API, which honours their budgets: it refuses a
pod (429) when the one budget selecting it allows no more disruptions (`status.disruptionsAllowed`,
kept by the disruption controller), and refuses (500) any pod more than one budget selects. A
preemption that needs a pod the API will not let go reserves room that never comes free, so the
preemptor would wait out its bind timeout and be rolled back. Preemption therefore gives back the
pods budgets protect before any other (the scheduler reprieves the pods whose going would violate
a budget first, too) and does not preempt at all when its victims would need more than the
budgets allow.

Groups are not covered: a group's owner is suspended and its operator deletes its pods, or its
members are deleted, as the rollback does; neither goes through the Eviction API.

Not modelled: a pod that is not Ready is counted as taking a disruption (the API may let it go
without one, depending on the budget's `unhealthyPodEvictionPolicy`), which errs on the side of
sparing it.
"""

from gangkeeper.controller.model.members import Member
from gangkeeper.controller.model.objects import Budget

POD_DISRUPTION_BUDGETS = "poddisruptionbudgets.policy"  # the informer's resource name (`kube.POD_DISRUPTION_BUDGETS`)


class Budgets:
    """The cluster's budgets by namespace, kept by the index one change at a time."""

    __slots__ = ("_by_namespace",)

    def __init__(self) -> None:
        self._by_namespace: dict[str, dict[str, Budget]] = {}

    def put(self, key: str, budget: Budget | None) -> None:
        """A budget added or changed (as `budget_from_api` reads it, which is what the informer
        keeps), or gone (None); `key` is `namespace/name`."""
        namespace, _, name = key.rpartition("/")
        budgets = self._by_namespace.setdefault(namespace, {})
        if budget is None:
            budgets.pop(name, None)
        else:
            budgets[name] = budget
        if not budgets:
            del self._by_namespace[namespace]

    def covering(self, member: Member) -> tuple[Budget, ...]:
        """The budgets selecting the pod, by name."""
        budgets = self._by_namespace.get(member.namespace)
        if not budgets:
            return ()
        return tuple(budget for _, budget in sorted(budgets.items()) if budget.selects(member))

    def __len__(self) -> int:
        return sum(len(budgets) for budgets in self._by_namespace.values())
