"""The scheduler's checks, as the kube-scheduler's filters decide them: whether a member may run
on a node (`eligibility`), its host ports (`ports`), its volumes (`volumes`), the pods around it
(`interpod`) and its devices (`dra`)."""
