"""The study's results as Markdown and two plots; the targets are judged from the figures.

`markdown(results, plots)` is pure; `plot(results, directory, prefix)` writes the PNGs with
matplotlib's Agg backend (no display needed) and returns their paths.
"""

import json
from pathlib import Path

from study.run import BASELINES, POLICIES, WARM_UP

GPU_HOUR_PRICE = 2.50  # US$ per GPU-hour: roughly an on-demand A100 in 2025; an assumption, not a quote
# One per policy, in POLICIES order; the sensitivity row dashed and hollow, so that it stays
# visible where another line covers it.
STYLES = ({"marker": "o"}, {"marker": "v", "linestyle": "--", "markerfacecolor": "none", "markersize": 9},
          {"marker": "s"}, {"marker": "^"})
UTILISATION_TOLERANCE = 0.05
DELAY_TIE = 1.0  # seconds: delays closer than this (or 1%) to the lowest count as a tie  # "within 5%": relative to the better baseline
LABELS = {"stock": "stock scheduler", "stock-binpack": "stock, bin-packing profile", "quota": "quota-only gate",
          "gangkeeper": "gangkeeper"}


def _runs(results: dict) -> dict[tuple[float, str], dict]:
    return {(run["load"], run["policy"]): run for run in results["runs"]}


def _hours(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds / 3600:.1f} h"


def delay_text(seconds: float | None) -> str:
    """Seconds below ten minutes, minutes from there; a dash for no value."""
    if seconds is None:
        return "—"
    return f"{seconds:.0f} s" if seconds < 600 else f"{seconds / 60:.0f} min"


def table(results: dict) -> str:
    header = ("| load (offered) | policy | not completed (never started) | partly placed at horizon "
              "| GPU-h held by incomplete groups | cost at $2.50/GPU-h | GPU-h in container start "
              "| useful utilisation | queueing delay mean / p95 | makespan |")
    lines = [header, "|" + "---|" * 10]
    runs = _runs(results)
    for load in results["setup"]["loads"]:
        for policy in POLICIES:
            run = runs.get((load, policy))
            if run is None:
                continue
            f = run["figures"]
            makespan = _hours(f["makespan_s"]) + ("" if f["all_completed"] else " (not all completed)")
            lines.append(
                f"| {load:g} ({run['offered_load']:.2f}) | {LABELS[policy]} "
                f"| {f['not_completed']} ({f['never_started']}) | {f['stuck_partial']} "
                f"| {f['partial_gpu_hours']:,.1f} | ${f['partial_gpu_hours'] * GPU_HOUR_PRICE:,.0f} "
                f"| {f['startup_gpu_hours']:,.1f} | {f['utilisation']:.1%} "
                f"| {delay_text(f['mean_delay_s'])} / {delay_text(f['p95_delay_s'])} | {makespan} |")
    return "\n".join(lines)


def targets(results: dict) -> list[tuple[str, bool, str]]:
    """(target, met, evidence) for each target of the study, judged from the figures."""
    runs = _runs(results)
    loads = sorted(results["setup"]["loads"])
    gk = {load: runs[(load, "gangkeeper")]["figures"] for load in loads if (load, "gangkeeper") in runs}
    found = []
    deadlocks = {load: f["not_completed"] for load, f in gk.items()}
    found.append(("gangkeeper: no job left unfinished (deadlocked) at any load", not any(deadlocks.values()),
                  ", ".join(f"{load:g}: {n}" for load, n in deadlocks.items())))
    waste = {load: f["partial_gpu_hours"] for load, f in gk.items()}
    found.append(("gangkeeper: zero GPU-hours held by incomplete groups at every load", not any(waste.values()),
                  ", ".join(f"{load:g}: {hours:g} GPU-h" for load, hours in waste.items())))
    for load, rule in ((loads[0], "within"), (loads[-1], "above")):
        baselines = {p: runs[(load, p)]["figures"]["utilisation"] for p in BASELINES if (load, p) in runs}
        if load not in gk or not baselines:
            continue
        best_policy = max(baselines, key=baselines.get)
        best, ours = baselines[best_policy], gk[load]["utilisation"]
        met = ours >= best * (1 - UTILISATION_TOLERANCE) if rule == "within" else ours > best
        goal = "within 5% of" if rule == "within" else "above"
        found.append((f"gangkeeper utilisation {goal} the better baseline at load {load:g}", met,
                      f"{ours:.1%} vs {LABELS[best_policy]} {best:.1%} ({(ours - best) / best:+.1%})"))
    return found


def packing_notes(results: dict) -> list[str]:
    """gangkeeper beside the stock scheduler with a bin-packing profile: how much of the difference
    to the default stock scheduler is packing (not a target; a sensitivity check)."""
    runs, notes, gaps = _runs(results), [], []
    for load in results["setup"]["loads"]:
        if (load, "gangkeeper") not in runs or (load, "stock-binpack") not in runs:
            continue
        gaps.append(abs(runs[(load, "gangkeeper")]["figures"]["utilisation"]
                        - runs[(load, "stock-binpack")]["figures"]["utilisation"]) * 100)
        ours, packed = runs[(load, "gangkeeper")]["figures"], runs[(load, "stock-binpack")]["figures"]
        notes.append(
            f"load {load:g}: utilisation {ours['utilisation']:.1%} vs {packed['utilisation']:.1%} "
            f"({(ours['utilisation'] - packed['utilisation']) * 100:+.1f} points); GPU-h held by incomplete groups "
            f"{ours['partial_gpu_hours']:,.1f} vs {packed['partial_gpu_hours']:,.1f}; delay mean "
            f"{delay_text(ours['mean_delay_s'])} vs {delay_text(packed['mean_delay_s'])}, "
            f"p95 {delay_text(ours['p95_delay_s'])} vs {delay_text(packed['p95_delay_s'])}; "
            f"not completed {ours['not_completed']} vs {packed['not_completed']}")
    if gaps and max(gaps) < 1.0:
        notes.append(f"utilisation is the same within {max(gaps):.1f} points at every load: gangkeeper's gain over "
                     "the default stock scheduler comes from packing GPUs onto few nodes, which the bin-packing "
                     "profile does too; what admitting whole groups adds is the column of GPU-hours held by "
                     "incomplete groups")
    return notes


def delay_notes(results: dict) -> list[str]:
    """Where each policy has the lowest mean and p95 queueing delay, baselines included; delays
    within `DELAY_TIE` of the lowest (the controller's 0.05 s debounce, say) tie with it."""
    runs, notes = _runs(results), []
    for load in results["setup"]["loads"]:
        for measure, key in (("mean", "mean_delay_s"), ("p95", "p95_delay_s")):
            values = {p: runs[(load, p)]["figures"][key] for p in POLICIES
                      if (load, p) in runs and runs[(load, p)]["figures"][key] is not None}
            if values:
                lowest = min(values.values())
                winners = [LABELS[p] for p, v in values.items() if v <= lowest + max(DELAY_TIE, 0.01 * lowest)]
                verdict = f"lowest under {winners[0]}" if len(winners) == 1 else f"a tie between {' and '.join(winners)}"
                listed = ", ".join(f"{LABELS[p]} {delay_text(v)}" for p, v in values.items())
                notes.append(f"load {load:g}, {measure} delay: {verdict} ({listed})")
    return notes


def save(results: dict, path: Path) -> None:
    """The figures as JSON (without the per-job rows), to compare runs or plot them again."""
    summary = {"setup": results["setup"],
               "runs": [{key: value for key, value in run.items() if key != "jobs"} for run in results["runs"]]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")


def plot(results: dict, directory: Path, prefix: str = "study") -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs, loads = _runs(results), results["setup"]["loads"]
    directory.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, key, ylabel, title in (
            ("waste", "partial_gpu_hours", "GPU-hours held by incomplete groups",
             "GPUs held by partly placed jobs (waste)"),
            ("utilisation", "utilisation", "useful GPU utilisation", "Useful GPU utilisation")):
        figure, axes = plt.subplots(figsize=(6.4, 4.2), dpi=120)
        for policy, style in zip(POLICIES, STYLES):
            points = [(load, runs[(load, policy)]["figures"][key]) for load in loads if (load, policy) in runs]
            if points:
                axes.plot([x for x, _ in points], [y for _, y in points], label=LABELS[policy], **style)
        if key == "utilisation":
            axes.plot(loads, [min(load, 1.0) for load in loads], linestyle=":", color="grey",
                      label="offered load (capped at 1)")
            axes.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
        axes.set_xlabel("offered load")
        axes.set_ylabel(ylabel)
        axes.set_title(title)
        axes.set_xticks(loads)
        axes.grid(alpha=0.3)
        axes.legend()
        figure.tight_layout()
        path = directory / f"{prefix}-{name}.png"
        figure.savefig(path)
        plt.close(figure)
        paths[name] = path
    return paths


def markdown(results: dict, plots: dict[str, str]) -> str:
    setup = results["setup"]
    cluster = setup["cluster"]
    durations = setup["durations"]
    sizes = ", ".join(f"{size} GPU{'s' * (size > 1)} {share:.1%}" for size, share in setup["sizes"])
    verdicts = "\n".join(f"- {'met' if met else '**not met**'}: {what} — {evidence}"
                         for what, met, evidence in targets(results))
    delays = "\n".join(f"- {note}" for note in delay_notes(results))
    packing = "\n".join(f"- {note}" for note in packing_notes(results)) or "- (not run)"
    walls = ", ".join(f"{run['policy']}@{run['load']:g} {run['counters']['wall_seconds']} s" for run in results["runs"])
    controller = "\n".join(
        f"| {run['load']:g} | {c['passes']:,} | {c['controller_writes']:,} | {c['failed_actions']:,} "
        f"| {c['index_inconsistencies']} | {c['webhook_requests']:,} |"
        for run in results["runs"] if run["policy"] == "gangkeeper" for c in [run["counters"]])
    images = "\n\n".join(f"![{name}]({path})" for name, path in plots.items())
    return f"""## Study: stock scheduler vs quota gate vs gangkeeper under load

`study/` (`gangkeeper bench study`). {setup['jobs']:,} jobs per load, seed {setup['seed']}, replayed on the
emulated cluster's virtual clock: {cluster['nodes']} nodes × {cluster['gpus_per_node']} GPUs
({setup['cluster_gpus']} GPUs), Poisson arrivals at each offered load (Σ GPU-seconds demanded per second ÷
cluster GPUs; the realised value is in brackets). The same jobs in the same order at every load: only the
arrival rate changes.

- **Job sizes**: {sizes}. The shape (mostly 1 GPU, a tail to 64) is that of Microsoft's Philly trace (Jeon et
  al., "Analysis of Large-Scale Multi-Tenant GPU Clusters for DNN Training Workloads", USENIX ATC 2019); the
  shares are our approximation of it, not the paper's table, which we could not retrieve — re-derive them
  from the public `cluster_job_log` before quoting them as Philly's.
- **Durations**: log-normal, median {durations['median']:.0f} s, σ {durations['sigma']}, clipped to
  [{durations['low']:.0f} s, {durations['high'] / 3600:.0f} h]; a job trains only while all its workers run.
- **Workloads**: PyTorchJobs of N × 1-GPU workers for N < 8 and N/8 × 8-GPU workers for N ≥ 8 (the mix is
  what fragments nodes). Pods request {cluster['cpu_per_gpu']} CPUs and {cluster['memory_gi_per_gpu']} GiB
  per GPU; the emulated kube-scheduler scores with its default, LeastAllocated over CPU and memory, which
  spreads 1-GPU pods over nodes. Finished jobs are deleted (ttlSecondsAfterFinished 0).
- **Policies**: the stock scheduler (no gating, default profile); the same with a bin-packing profile
  (sensitivity row, not one of the targets' baselines); a quota-only gate (pods gated at creation; a whole
  job released when its GPUs fit in the cluster's GPUs not taken by released, unfinished jobs — no node
  fit, no pinning; BestEffortFIFO, no `waitForPodsReady`); gangkeeper (the product: see the end).
- **Horizon**: each replay runs {setup['drain_seconds'] / 3600:.0f} h past its last arrival; a job not finished
  by then counts as not completed. **Utilisation** is useful GPU-seconds (all workers of the job running)
  over the cluster's GPU-seconds, from the end of the first {WARM_UP:.0%} of the arrival span (warm-up) to the
  last arrival. **Queueing delay** is submission to all workers running, over the jobs that started.
  **GPU-hours held by incomplete groups**: GPUs held by pods of a job some of whose workers are bound
  while others are not; GPUs held after all are bound but before all run (the 2 s container start) are
  the next column, the same for every policy. Cost at ${GPU_HOUR_PRICE:.2f} per GPU-hour (an on-demand-ish
  A100 price; an assumption).

{table(results)}

Targets (gangkeeper against the stock scheduler and the quota-only gate), judged from the figures above:

{verdicts}

Queueing delay, lowest per load among all four rows (where a baseline wins, it says so):

{delays}

Sensitivity: gangkeeper against the stock scheduler with a bin-packing profile (NodeResourcesFit
MostAllocated, weights cpu 1, memory 1, nvidia.com/gpu 3) — how much of the difference to the default
stock scheduler comes from packing nodes tightly rather than from admitting whole groups:

{packing}

{images}

**What is product code and what is scaffolding.** Under `gangkeeper`, admission is the real webhook app
(`webhook.app.create_app`: AdmissionReview parsing, `webhook.mutate`, `webhook.validate`), called in
process through Flask's test client under the product's own `deploy/base/webhook-configurations.yaml`
(rules and namespace selectors applied by the emulated API server); the controller is the real
`controller.runner.Controller` with its defaults — its loop's turns (`Controller.turn`, each when
`Controller.due` says: debounce, resync, deadlines, the index's periodic rebuild), `controller.cache.index.ClusterIndex`,
`controller.deciding.reconciler.reconcile` and `controller.acting.executor.Executor`, fed by the informers' own transforms
(`pod_facts`, `workload_from_api`, `node_from_api`) — on the virtual clock. Scaffolding (`study/`): the
in-process `Kube` subset the Executor writes through and the informers fed from the cluster's watch events
(`study/adapter.py`, errors classified by the product's `controller.reading.kube.error_from`), the quota-only gate
(its own gate and release rule), the cleaner of finished jobs, and the measurements. Not exercised: HTTP,
TLS, gunicorn, list/watch, the loop's thread, leader election. The emulated API server, scheduler, kubelets
and operator are `sim/`.

The gangkeeper controller in these replays (per load): turns (passes), API writes it made (reservations,
releases, Gang status, Events), writes refused (conflicts), turns whose periodic rebuild of the index
found it had drifted (`ClusterIndex.rebuilt_from`; every 600 s), and webhook requests:

| load | passes | controller writes | refused | index drifts | webhook requests |
|---|---|---|---|---|---|
{controller}

Reproduce: `gangkeeper bench study` (`make bench` runs it with the other sections), seed {setup['seed']}.
Repeated runs gave identical figures; object UIDs are random, though, and a group's key holds its job's UID,
so two groups first seen in one controller turn could be queued in a different order on another run.
`--quick` replays 200 jobs on 16 nodes to check that it works. Wall time of each replay: {walls}.
"""
