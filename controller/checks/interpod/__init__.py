"""Where a member may not go because of the pods around it (`refusal`: required inter-pod
affinity and anti-affinity, topology spread and host ports), and the pods around it as those
filters count them (`placements`, on the counts of `tallies`)."""
