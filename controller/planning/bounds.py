"""Whether a group could fit at all: on the cluster as it is, with every pod gone.

The starving head of the queue (`planning.queue`) holds the capacity that frees until it fits.
A group that asks for more accelerators than the nodes that may take it hold, even when empty,
never fits: its hold would keep the capacity that frees from every group behind it, for ever,
and gain it nothing. Such a group waits without holding, and says why (`beyond_the_cluster`).
On an autoscaled cluster the nodes it needs come from a ProvisioningRequest or placeholders
(`deciding.provisioning`), not from the hold.

Counted per class of members (the same accelerator, amount and eligible nodes): how many such
members the eligible nodes' allocatable holds (`NodePool.slots`); then, per accelerator, the
classes' sum against the allocatable of every node some class may use. Accelerators alone, as
the planner's first count (`classes.fits_somewhere`): a group that passes may still never fit
for another reason (its topology, devices), which its `NoFit` says.
"""

from collections import Counter
from math import ceil

from gangkeeper.controller.cache.capacity import Ledger
from gangkeeper.controller.checks.eligibility import NodePool
from gangkeeper.controller.model.members import Group


def beyond_the_cluster(group: Group, pool: NodePool, ledger: Ledger) -> str | None:
    """Why the group's live members could not all be placed on the empty cluster, in words its
    owner can act on; None when they could, counting accelerators (module docstring)."""
    classes: Counter = Counter()
    for member in group.members:
        if member.terminal:
            continue
        wanted = [(value, name) for name, value in member.requests.items() if ledger.is_accelerator(name)]
        if wanted:
            amount, accelerator = max(wanted)
            classes[pool.eligible(member), accelerator, ceil(amount)] += 1
    for (eligible, accelerator, per_member), count in classes.items():
        slots = pool.slots(eligible, accelerator, per_member)
        if slots < count:
            return (f"{count} members need {per_member} {accelerator} each, and {_nodes(len(eligible))} that may "
                    f"take them hold {slots} such members even when empty")
    by_accelerator: dict[str, list] = {}
    for (eligible, accelerator, per_member), count in classes.items():
        by_accelerator.setdefault(accelerator, []).append((eligible, per_member * count))
    for accelerator, asks in by_accelerator.items():
        if len(asks) < 2:
            continue
        asked = sum(amount for _, amount in asks)
        nodes = frozenset().union(*(eligible for eligible, _ in asks))
        held = pool.slots(nodes, accelerator, 1)
        if held < asked:
            return f"its members need {asked} {accelerator}, and {_nodes(len(nodes))} that may take them hold {held}"
    return None


def _nodes(count: int) -> str:
    return "the one node" if count == 1 else f"the {count} nodes"
