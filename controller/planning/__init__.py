"""Planning: where a group's members go, and which groups one pass admits. Pure: the ledger and
occupancy given are copied or left as they were found.

`planner.plan_group` is the entry: members in classes of identical ones (`classes`), packed into a
domain of the cluster's topology or anywhere (`packing`, in the node order of `shelves`), or by the
group's own topology rule (`rule_search`, over the domains of `domains`); a `plans.Plan`, or a
`plans.NoFit` saying why not (`nofit`). `queue` plans a pass over the waiting groups, and
`preemption` finds whose place a group that does not fit takes.
"""
