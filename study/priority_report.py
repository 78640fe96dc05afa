"""The priority mix's results (`study.priorities.run`) as Markdown; pure.

`table` has one row per policy (`cells`); `best_notes` says, measure by measure, which policy does
best (baselines included, and says so when one of them does); `preemption_notes` sets gangkeeper
with preemption beside gangkeeper without it; `check_notes` are the measurements' own checks and
`repeat_notes` what a second replay of a policy gave otherwise.
"""

from collections.abc import Callable
from dataclasses import dataclass

from study import report
from study.priorities import CLASSES, POLICIES
from study.report import delay_text
from study.run import GANGKEEPER, WARM_UP
from study.trace import HIGH, LOW

LABELS = {**report.LABELS, "gangkeeper": "gangkeeper (preemption on)",
          "gangkeeper-no-preemption": "gangkeeper (preemption off)"}


@dataclass(frozen=True)
class Measure:
    name: str
    value: Callable[[dict], float | None]  # of one run of the results
    lower_is_better: bool
    text: Callable[[float | None], str]
    tie: Callable[[float], float]  # values within this of the best (given the best) tie with it


def _gpu_hours(value: float | None) -> str:
    return "—" if value is None else f"{round(value, 1) or 0.0:,.1f} GPU-h"  # never "-0.0" for float noise


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.1%}"


def _count(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def _delay_tie(best: float) -> float:
    return max(report.DELAY_TIE, 0.01 * best)


def _class(name: str, key: str) -> Callable[[dict], float | None]:
    return lambda run: run["classes"][name][key]


def _figure(key: str) -> Callable[[dict], float | None]:
    return lambda run: run["figures"][key]


def _both(key: str) -> Callable[[dict], float]:
    return lambda run: sum(figures[key] for figures in run["classes"].values())


VICTIMS = Measure("victim jobs", _both("victims"), True, _count, lambda best: 0.0)
AT_STAKE = Measure("progress at stake (lost without checkpoints)", _both("at_stake_gpu_hours"), True, _gpu_hours,
                   lambda best: 0.05)
PARTIAL = Measure("GPU-hours held by partly placed jobs", _figure("partial_gpu_hours"), True, _gpu_hours,
                  lambda best: 0.05)
UTILISATION = Measure("useful GPU utilisation", _figure("utilisation"), False, _percent, lambda best: 0.001)
MEASURES = (
    Measure("high-priority jobs' mean queueing delay", _class(HIGH.name, "mean_delay_s"), True, delay_text,
            _delay_tie),
    Measure("high-priority jobs' p95 queueing delay", _class(HIGH.name, "p95_delay_s"), True, delay_text,
            _delay_tie),
    Measure("low-priority jobs' mean queueing delay", _class(LOW.name, "mean_delay_s"), True, delay_text, _delay_tie),
    Measure("low-priority jobs' p95 queueing delay", _class(LOW.name, "p95_delay_s"), True, delay_text, _delay_tie),
    Measure("low-priority jobs' mean time waited in all", _class(LOW.name, "mean_waited_s"), True, delay_text,
            _delay_tie),
    VICTIMS, AT_STAKE, PARTIAL, UTILISATION,
    Measure("jobs not completed", _figure("not_completed"), True, _count, lambda best: 0.0),
)


def _runs(results: dict) -> dict[str, dict]:
    return {run["policy"]: run for run in results["runs"]}


def _pair(first: str, second: str) -> str:
    return f"{first} / {second}"


COLUMNS = ("policy", "high: queueing delay mean / p95", "low: queueing delay mean / p95",
           "high: waited in all mean / p95", "low: waited in all mean / p95", "victim jobs (preemptions)",
           "progress at stake without checkpoints", "progress re-done", "GPU-h held by partly placed jobs",
           "useful utilisation", "not completed (high / low)")


def cells(run: dict) -> tuple[str, ...]:
    """One run's row of the table, a cell per `COLUMNS`."""
    high, low, f = run["classes"][HIGH.name], run["classes"][LOW.name], run["figures"]
    return (LABELS[run["policy"]],
            _pair(delay_text(high["mean_delay_s"]), delay_text(high["p95_delay_s"])),
            _pair(delay_text(low["mean_delay_s"]), delay_text(low["p95_delay_s"])),
            _pair(delay_text(high["mean_waited_s"]), delay_text(high["p95_waited_s"])),
            _pair(delay_text(low["mean_waited_s"]), delay_text(low["p95_waited_s"])),
            f"{high['victims'] + low['victims']} ({high['preemptions'] + low['preemptions']})",
            _gpu_hours(high["at_stake_gpu_hours"] + low["at_stake_gpu_hours"]),
            _gpu_hours(high["redone_gpu_hours"] + low["redone_gpu_hours"]),
            _gpu_hours(f["partial_gpu_hours"]), _percent(f["utilisation"]),
            f"{high['not_completed']} / {low['not_completed']}")


def table(results: dict) -> str:
    runs = _runs(results)
    rows = [cells(runs[policy]) for policy in POLICIES if policy in runs]
    return "\n".join("| " + " | ".join(row) + " |" for row in (COLUMNS, ("---",) * len(COLUMNS), *rows))


def repeat_notes(results: dict) -> list[str]:
    """Each policy replayed twice: the table's cells its second replay gave otherwise, or that it
    gave them all the same."""
    runs, notes = _runs(results), []
    for repeat in results["repeats"]:
        first, second = cells(runs[repeat["policy"]]), cells(repeat)
        changed = [f"{column} {again} (table: {before})"
                   for column, before, again in zip(COLUMNS[1:], first[1:], second[1:]) if before != again]
        label = LABELS[repeat["policy"]]
        notes.append(f"{label}, replayed a second time from the same trace: " + (
            "; ".join(changed) if changed else "every figure of its row came out the same this time"))
    return notes


def best_notes(results: dict) -> list[str]:
    """Per measure: the policy that does best, or the ones that tie, and every policy's value."""
    runs, notes = _runs(results), []
    for measure in MEASURES:
        values = {p: measure.value(runs[p]) for p in POLICIES if p in runs and measure.value(runs[p]) is not None}
        if not values:
            continue
        best = min(values.values()) if measure.lower_is_better else max(values.values())
        winners = [p for p, v in values.items() if abs(v - best) <= measure.tie(best)]
        if len(winners) == len(values):
            verdict = "the same under every policy"
        elif len(winners) == 1:
            verdict = f"best under {LABELS[winners[0]]}"
        else:
            verdict = f"best under {' and '.join(LABELS[p] for p in winners)} (a tie)"
        if not set(winners) & set(GANGKEEPER):
            verdict += " — a baseline does better than gangkeeper here"
        notes.append(f"{measure.name}: {verdict} "
                     f"({', '.join(f'{LABELS[p]} {measure.text(v)}' for p, v in values.items())})")
    return notes


def _change(on: float | None, off: float | None, measure: Measure) -> str:
    if on is None or off is None:
        return f"{measure.text(on)} with, {measure.text(off)} without"
    if abs(on - off) <= measure.tie(min(on, off)):
        direction = "a tie"
    else:
        direction = f"{'lower' if on < off else 'higher'} with preemption"
    return f"{measure.text(on)} with, {measure.text(off)} without ({direction})"


def preemption_notes(results: dict) -> list[str]:
    """gangkeeper with preemption against gangkeeper without: what it buys the high-priority
    jobs and what it costs the low-priority ones."""
    runs = _runs(results)
    if "gangkeeper" not in runs or "gangkeeper-no-preemption" not in runs:
        return []
    on, off = runs["gangkeeper"], runs["gangkeeper-no-preemption"]
    delays = [Measure(f"{name}-priority jobs' {what}", _class(name, key), True, delay_text, _delay_tie)
              for name in CLASSES
              for key, what in (("mean_delay_s", "mean queueing delay"), ("p95_delay_s", "p95 queueing delay"),
                                ("mean_waited_s", "mean time waited in all"),
                                ("p95_waited_s", "p95 time waited in all"))]
    return [f"{measure.name}: {_change(measure.value(on), measure.value(off), measure)}"
            for measure in (*delays, VICTIMS, AT_STAKE, PARTIAL, UTILISATION)]


def check_notes(results: dict) -> list[str]:
    """What the measurements check of themselves: interruptions nothing explains, training done
    twice, and gangkeeper's own count of what it preempted beside what the cluster showed."""
    notes = []
    for run in results["runs"]:
        classes, counters, label = run["classes"], run["counters"], LABELS[run["policy"]]
        redone = sum(figures["redone_gpu_hours"] for figures in classes.values())
        interruptions = sum(figures["interruptions"] for figures in classes.values())
        line = (f"{label}: training runs interrupted by preemption {interruptions}, by anything else "
                f"{run['other_interruptions']}; training done twice {redone:+.3f} GPU-h")
        if "preemptions" in counters:
            taken = ", ".join(f"{how} {count}" for how, count in sorted(counters["preemptions"].items())) or "none"
            line += (f"; the controller's `gangkeeper_preemptions_total`: {taken}, against "
                     f"{sum(figures['preemptions'] for figures in classes.values())} preemptions seen on the "
                     f"cluster; rollbacks {counters['rollbacks']}")
        notes.append(line)
    return notes


def markdown(results: dict) -> str:
    setup = results["setup"]
    cluster = setup["cluster"]
    shares = ", ".join(f"{name} {share:.1%}" for name, share in setup["shares"].items())
    classes = ", ".join(f"`{name}` {value}" for name, value in setup["classes"].items())
    bullets = {title: "\n".join(f"- {note}" for note in notes) or "- (not run)"
               for title, notes in (("best", best_notes(results)), ("preemption", preemption_notes(results)),
                                    ("checks", check_notes(results)), ("repeats", repeat_notes(results)))}
    backoff = GANGKEEPER["gangkeeper"].rollback_backoff_seconds
    walls = ", ".join([f"{run['policy']} {run['counters']['wall_seconds']} s" for run in results["runs"]]
                      + [f"{run['policy']} again {run['counters']['wall_seconds']} s" for run in results["repeats"]])
    return f"""## Priority mix: {setup['high_share']:.0%} of the jobs at high priority, load {setup['load']:g}

`study/priorities.py` (`gangkeeper bench priorities`).
The study's trace at load {setup['load']:g} (offered {setup['offered_load']:.2f}): {setup['jobs']:,} jobs,
seed {setup['seed']}, on {cluster['nodes']} nodes × {cluster['gpus_per_node']} GPUs ({setup['cluster_gpus']} GPUs)
— the same jobs and arrivals as the main study's row for that load.
A uniform sample of the jobs, drawn from the seed alone, is in the PriorityClass `high`, the rest in `low`
(values: {classes}; drawn: {shares}); both classes preempt lower priorities.
Every policy runs on the emulated kube-scheduler with its DefaultPreemption: under the stock scheduler and the
quota-only gate (which releases high-priority jobs first and never preempts) it is the scheduler that preempts,
pod by pod; gangkeeper with preemption on takes whole lower-priority jobs (suspends them; they are resumed after
the {backoff:g} s rollback backoff and queue again); with preemption off (`--preemption=Never`) priority only
orders its queue.
Each replay runs {setup['drain_seconds'] / 3600:.0f} h past the last arrival.

- **Queueing delay**: submission to all workers first running together (the main study's), per class, over the
  jobs that started. **Waited in all**: completion − submission − the job's duration, over the jobs that
  completed: every second the job was not training, the time it queued again after a preemption included.
- **Victim jobs (preemptions)**: jobs at least one of whose pods was preempted — marked DisruptionTarget
  (PreemptionByScheduler) by the kube-scheduler, or named in gangkeeper's `Preempted` Event — and, in brackets,
  the distinct moments that happened, summed over the victims.
- **Progress at stake without checkpoints**: for each time preemption stopped a training run (all workers were
  running together and one was deleted), the job's GPUs × the time it had trained since it last began to run
  together: what a job that keeps no checkpoint throws away. **Progress re-done**: Σ over completed jobs of the
  GPU-seconds they trained − GPUs × duration, as measured: the emulation's training keeps a job's progress
  across its pods' deletion (`sim.training`: progress belongs to the workload), so a preempted job resumes where
  it stopped and this is zero — preemption costs these replays waiting and partly held GPUs, not redone work;
  the column before says what it would cost jobs that checkpoint never.
- **GPU-h held by partly placed jobs** and **useful utilisation**: as in the main study (utilisation over the
  arrival span after its first {WARM_UP:.0%}).

{table(results)}

Which policy does best, measure by measure (where a baseline does, it says so):

{bullets['best']}

gangkeeper with preemption against gangkeeper without it:

{bullets['preemption']}

Checks:

{bullets['checks']}

Whether one replay can be trusted. gangkeeper's preemption breaks ties between equally cheap victims (its
queue, between groups first seen in one controller turn) by names and uids; the emulated API server draws them
from a fixed seed (`study.policies.CLUSTER_SEED`), so a replay is the same every time (while they were random,
2 of 7 full-size replays of gangkeeper with preemption on went their own way from the first tie on). It is
replayed a second time from the same trace to show it; any figure it gave otherwise is listed here:

{bullets['repeats']}

Reproduce: `gangkeeper bench priorities` (seed {setup['seed']}); `--quick` replays 200 jobs on 16 nodes to check
that it works. Wall time of each replay: {walls}.
"""
