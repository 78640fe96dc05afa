"""The autoscaled cluster's results (`study.autoscaling.run`) as Markdown; pure.

`table` sets the policies side by side on the issue's three measures (large jobs' time to start,
GPU-hours of added nodes left idle, jobs never started) and what goes with them; `check_notes` are
the replays' checks: gangkeeper's invariants on every change, and what the controller asked for.
"""

from study.autoscaling import POLICIES
from study.report import delay_text

LABELS = {"stock": "stock scheduler", "gangkeeper": "gangkeeper, `None` (no provisioning)",
          "gangkeeper-provisioning-request": "gangkeeper, `ProvisioningRequest`",
          "gangkeeper-placeholders": "gangkeeper, `Placeholders`"}
COLUMNS = ("policy", "large jobs: time to start p50 / p95", "jobs never started (large + small)",
           "small jobs: time to start p50 / p95", "GPU-h of added nodes", "of them idle (held by placeholders)",
           "GPU-h held by partly placed jobs", "nodes added (most at once)")


def _ordered(results: dict) -> list[dict]:
    runs = {run["policy"]: run for run in results["runs"]}
    return [runs[policy] for policy in POLICIES if policy in runs]


def to_start(figures: dict, key: str) -> str:
    """A time to start; "not started" when the rank falls on a job that never started."""
    value = figures[key]
    if value is None:
        return "not started" if figures["jobs"] else "—"
    return delay_text(value)


def _times(figures: dict) -> str:
    return f"{to_start(figures, 'p50_to_start_s')} / {to_start(figures, 'p95_to_start_s')}"


def _markdown_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    return "\n".join("| " + " | ".join(row) + " |" for row in (header, ("---",) * len(header), *rows))


def table(results: dict) -> str:
    rows = []
    for run in _ordered(results):
        f = run["figures"]
        added, big, small = f["added"], f["large"], f["small"]
        never = big["never_started"] + small["never_started"]
        rows.append((LABELS[run["policy"]], _times(big),
                     f"{never} ({big['never_started']} of {big['jobs']} + {small['never_started']} of {small['jobs']})",
                     _times(small), f"{added['gpu_hours']:,.0f}",
                     f"{added['idle_gpu_hours']:,.0f} ({added['placeholder_gpu_hours']:,.0f})",
                     f"{f['partial_gpu_hours']:,.0f}", f"{added['nodes']} ({added['peak']})"))
    return _markdown_table(COLUMNS, rows)


def check_notes(results: dict) -> list[str]:
    notes = []
    for run in _ordered(results):
        c, broken = run["counters"], run["violations"]
        line = LABELS[run["policy"]] + ": "
        line += ("invariants broken: " + ", ".join(f"{kind} {count}" for kind, count in sorted(broken.items()))
                 + f", at {run['violation_moments']} moments" if broken else "no invariant broken")
        if "capacity" in c:
            failed = ", ".join(f"{how} {count}" for how, count in sorted(c["capacity"]["failed"].items()))
            line += (f"; asks of the autoscaler {c['capacity']['asked']}"
                     + (f" (came to nothing: {failed})" if failed else "")
                     + f"; rollbacks {c['rollbacks']}, failed controller writes {c['failed_actions']}")
        notes.append(line)
        notes += [f"  - {shown}" for shown in run["violations_shown"][:2]]
    return notes


def markdown(results: dict) -> str:
    setup, cluster, pool = results["setup"], results["setup"]["cluster"], results["setup"]["pool"]
    large = ", ".join(f"{count} of {size} GPUs" for size, count in setup["large_sizes"].items())
    small = ", ".join(f"{count} of {size}" for size, count in setup["small_sizes"].items())
    checks = "\n".join(note if note.startswith("  ") else f"- {note}" for note in check_notes(results))
    walls = ", ".join(f"{run['policy']} {run['counters']['wall_seconds']} s" for run in results["runs"])
    return f"""## Autoscaled cluster: large jobs that only new nodes can hold

`study/autoscaling.py` (`gangkeeper bench autoscaling`).
{cluster['nodes']} static nodes × {cluster['gpus_per_node']} GPUs ({setup['static_gpus']} GPUs) and a node group
(`{pool['name']}`) of the same nodes that the emulated cluster-autoscaler grows from 0 to {pool['max_nodes']}, each
node Ready {pool['provisioning_seconds']:g} s after it is asked for, and removes once empty (cluster-autoscaler's
defaults: unneeded for 10 min, and 10 min after the last scale-up); at most {setup['most_gpus']} GPUs.
{setup['jobs']:,} PyTorchJobs, seed {setup['seed']}, Poisson arrivals over {setup['arrival_span_s'] / 3600:.1f} h at
an offered load of {setup['offered_load']:.2f} of those {setup['most_gpus']} GPUs; durations log-normal (median
30 min, 5 min to 4 h). **Large jobs**: {setup['large_jobs']} ({large}; {setup['large_gpu_share']:.0%} of the
GPU-seconds), more GPUs than the static nodes hold; small ones: {small} GPUs. Each replay runs
{setup['drain_seconds'] / 3600:.0f} h past the last arrival (the horizon). Policies: the kube-scheduler alone (the
autoscaler adds nodes for its pending pods), and gangkeeper with each `--capacity-provisioning` mode.

- **Time to start**: submission to all of a job's workers first running together, p50 and p95 (nearest rank)
  over all the jobs of the kind; a job not started by the horizon counts as later than any that did, and a rank
  that falls on one reads "not started".
- **GPU-h of added nodes**: the GPUs of every node the autoscaler added, from its creation (Ready; the
  provisioning time before it is not counted) to its removal or the horizon. **Idle**: of those, the GPUs no job's
  pod requested — not requested by any bound pod that has not finished, or requested by a placeholder (a pause
  pod; in brackets). GPUs held by a partly placed job are not idle here: they are the next column.
- **GPU-h held by partly placed jobs**: GPUs held by a job's bound pods while some of its pods are not bound
  (the main study's measure), on any node.
- **Nodes added**: nodes the autoscaler created over the replay (a name it reuses counts again), and the most
  standing at once.

{table(results)}

Checks (gangkeeper's invariants, `sim.invariants`, checked on every change; the first two broken, in words):

{checks}

Reproduce: `gangkeeper bench autoscaling` (seed {setup['seed']}); `--quick` replays 40 jobs to check that it
works. Wall time of each replay: {walls}.
"""
