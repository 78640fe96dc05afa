"""One reconcile pass (`reconciler`): what to write, never writing it, as typed actions
(`decisions`) with the bodies of the pod writes (`patches`), the Gangs (`gangs`), groups that
never complete (`incomplete`), and what is remembered from pass to pass (`memory`)."""
