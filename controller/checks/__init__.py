"""The scheduler's checks, decided as the kube-scheduler's filters decide them: whether a member
may run on a node by the node alone (`eligibility`), its host ports (`ports`), its volumes
(`volumes`), the pods around it (`interpod`) and its devices (`dra`). Pure, over `model` values."""
