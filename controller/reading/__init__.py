"""Reading the cluster: the one door to the Kubernetes API (`kube`), the informers that list and
watch through it (`informer`, decoding only what their transforms read: `shapes`), and the
transforms from API objects into `model` values: `nodes`, `pods` (a member and a pod's facts,
with the `rules` and `selectors` it writes), `workloads`, `budgets`, `claims`; `objects` is what
the informers keep of the objects the checks read whole."""
