"""The study (`gangkeeper bench study`): synthetic GPU-cluster traces replayed on the emulated
cluster's virtual clock under the stock scheduler, a quota-only gate and gangkeeper.

- `trace`: pure trace generation (job sizes, log-normal durations, Poisson arrivals; seeded).
- `policies`: the policies as cluster components. gangkeeper runs the product's code — the
  webhook app under its own webhook configurations, `controller.runner.Controller` turning on
  the virtual clock; the quota-only gate and everything else here is study scaffolding.
- `adapter`: the controller's I/O over the in-process API: the subset of `controller.reading.kube.Kube`
  the Executor calls, and informers fed from the cluster's watch events.
- `metrics`: GPU-seconds held usefully, in partly placed groups and in container start;
  preemptions and the training they interrupt; figures.
- `run`: one replay per policy and load; `report`: Markdown, plots and the targets' verdicts.
- `priorities` (`gangkeeper bench priorities`): the trace with a priority mix at one load, under
  each policy and gangkeeper with preemption off, measured per PriorityClass with `metrics.
  Preemptions`; `priority_report`: its Markdown.
- `autoscaling` (`gangkeeper bench autoscaling`): static nodes beside a node group the emulated
  cluster-autoscaler grows, a trace of small jobs and large ones only added nodes can hold, under
  the stock scheduler and gangkeeper with each `--capacity-provisioning` mode, measured by
  `metrics.AddedNodes` (GPU-hours of added nodes, and of those no job's pod requested) and
  gangkeeper's invariants on every change; `autoscaling_report`: its Markdown.
"""
