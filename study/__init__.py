"""The study (`gangkeeper bench study`): synthetic GPU-cluster traces replayed on the emulated
cluster's virtual clock under the stock scheduler, a quota-only gate and gangkeeper.

- `trace`: pure trace generation (job sizes, log-normal durations, Poisson arrivals; seeded).
- `policies`: the policies as cluster components. gangkeeper runs the product's code — the
  webhook app under its own webhook configurations, `ClusterIndex` + `reconcile` + `Executor`;
  the loop around them, the quota-only gate and everything else here is study scaffolding.
- `adapter`: the subset of `controller.kube.Kube` the Executor calls, over the in-process API.
- `metrics`: GPU-seconds held usefully, in partly placed groups and in container start; figures.
- `run`: one replay per policy and load; `report`: Markdown, plots and the targets' verdicts.
"""
