"""One reconcile pass (`reconciler`), pure: what to write, never writing it. Its parts: its working
state (`state`), what time alone decides (`timeouts`), reserving and releasing (`booking`),
`rollback`, taking lower-priority work's place (`preempting`), resuming the owners it suspended
(`resuming`), Events and Gang statuses (`reporting`); what it returns (`outcome`, `decisions`,
with the bodies of the pod writes in `patches`), the Gangs (`gangs`), groups that never complete
(`incomplete`), what is remembered from pass to pass (`memory`), how it decides (`settings`) and
what the API server can do (`capabilities`)."""
