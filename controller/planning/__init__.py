"""Planning: where a group's members go (`planner`, with the topology domains of `domains`),
which groups one pass admits (`queue`), and whose place a group that does not fit takes
(`preemption`). Pure: the ledger and occupancy given are copied, never changed."""
