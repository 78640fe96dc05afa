"""`kubectl gang`: gangkeeper's answers where users look, read only, with their own credentials.

kubectl runs `kubectl-gang` (on PATH) for `kubectl gang ...` and hands it the rest of the line.
`why POD|GANG` says where a group stands and why it waits; `plan -f FILE` says how a workload
not yet submitted would be grouped and placed now; `top` lists the groups by phase. The answers
are the controller's: the cluster is read with the controller's transforms into its index
(`ClusterIndex.build`), and planned by its queue, planner and preemption (`explain`).

Its modules: `cli` (flags, errors in one line), `connect` (the kubeconfig, as kubectl
reads it), `reading` (the API reads, and what could not be read), `submitted` (a manifest's pods
as their operator and the webhook would make them), `explain` and `closest` (the answers,
pure), `top` (the Gangs by phase, pure), `render` and `documents` (tables, JSON, YAML).
"""
