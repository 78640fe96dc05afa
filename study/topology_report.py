"""The topology run's results (`study.topology.run`) as Markdown; pure.

`placement_table` says where the multi-node jobs ran, `cost_table` what it cost (queueing delay,
utilisation, jobs completed), one row per policy; `rule_notes` sets each rule beside gangkeeper
without one, measure by measure, for the same jobs; `check_notes` are the measurements' checks.
"""

import json
from collections.abc import Callable
from pathlib import Path

from study import report
from study.report import delay_text
from study.run import WARM_UP
from study.topology import POLICIES

LABELS = {"stock": "stock scheduler", "gangkeeper": "gangkeeper, no rule",
          "gangkeeper-preferred": "gangkeeper, sample prefers one block",
          "gangkeeper-required": "gangkeeper, sample requires one block"}
SUBSET_NAMES = {"all": "all jobs", "multi_node": "multi-node jobs", "declaring": "the sample",
                "other_multi_node": "other multi-node jobs"}


def _runs(results: dict) -> dict[str, dict]:
    return {run["policy"]: run for run in results["runs"]}


def _ordered(results: dict) -> list[dict]:
    runs = _runs(results)
    return [runs[policy] for policy in POLICIES if policy in runs]


def within(figures: dict, key: str = "block") -> str:
    """`n / placed (share)` of one subset's jobs that ran within one domain; a dash for none placed."""
    placed = figures["placed"]
    if not placed:
        return "—"
    count = figures[f"in_one_{key}"]
    return f"{count} / {placed} ({count / placed:.0%})"


def _delays(figures: dict) -> str:
    return f"{delay_text(figures['mean_delay_s'])} / {delay_text(figures['p95_delay_s'])}"


def _markdown_table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> str:
    return "\n".join("| " + " | ".join(row) + " |" for row in (header, ("---",) * len(header), *rows))


PLACEMENT_COLUMNS = ("policy", "multi-node jobs within one block", "the sample within one block",
                     "other multi-node jobs within one block", "multi-node jobs within one zone",
                     "blocks per multi-node job (mean)")


def placement_table(results: dict) -> str:
    rows = []
    for run in _ordered(results):
        t = run["topology"]
        blocks = t["multi_node"]["mean_blocks"]
        rows.append((LABELS[run["policy"]], within(t["multi_node"]), within(t["declaring"]),
                     within(t["other_multi_node"]), within(t["multi_node"], "zone"),
                     "—" if blocks is None else f"{blocks:.2f}"))
    return _markdown_table(PLACEMENT_COLUMNS, rows)


COST_COLUMNS = ("policy", "queueing delay mean / p95: all jobs", "multi-node jobs", "the sample",
                "other multi-node jobs", "useful utilisation", "GPU-h held by partly placed jobs", "jobs completed")


def cost_table(results: dict) -> str:
    rows = []
    for run in _ordered(results):
        t, f = run["topology"], run["figures"]
        rows.append((LABELS[run["policy"]], _delays(t["all"]), _delays(t["multi_node"]), _delays(t["declaring"]),
                     _delays(t["other_multi_node"]), f"{f['utilisation']:.1%}", f"{f['partial_gpu_hours']:,.1f}",
                     f"{t['all']['completed']:,} / {t['all']['jobs']:,}"))
    return _markdown_table(COST_COLUMNS, rows)


def _difference(with_rule: float | None, without: float | None, text: Callable[[float], str], tie: float,
                more: str, less: str) -> str:
    if with_rule is None or without is None:
        return "—"
    if abs(with_rule - without) <= tie:
        return "the same"
    return f"{text(abs(with_rule - without))} {more if with_rule > without else less}"


def _delay_change(on: float | None, off: float | None) -> str:
    tie = max(report.DELAY_TIE, 0.01 * min(on, off)) if on is not None and off is not None else 0.0
    return _difference(on, off, delay_text, tie, "longer", "shorter")


def _delay_line(rule: dict, none: dict, subset: str) -> str:
    on, off = rule["topology"][subset], none["topology"][subset]
    return (f"queueing delay of {SUBSET_NAMES[subset]}, mean / p95: {_delays(on)} with the rule, {_delays(off)} "
            f"without ({_delay_change(on['mean_delay_s'], off['mean_delay_s'])} / "
            f"{_delay_change(on['p95_delay_s'], off['p95_delay_s'])})")


def rule_notes(results: dict) -> dict[str, list[str]]:
    """Per rule that ran beside gangkeeper without one: the same jobs' figures with and without it."""
    runs, notes = _runs(results), {}
    none = runs.get("gangkeeper")
    if none is None:
        return notes
    for policy in ("gangkeeper-preferred", "gangkeeper-required"):
        rule = runs.get(policy)
        if rule is None:
            continue
        lines = [f"{name} within one block: {within(rule['topology'][subset])} with the rule, "
                 f"{within(none['topology'][subset])} without"
                 for subset, name in (("declaring", "the sample"), ("multi_node", "all multi-node jobs"))]
        lines += [_delay_line(rule, none, subset) for subset in ("declaring", "other_multi_node", "multi_node", "all")]
        on, off = rule["figures"]["utilisation"], none["figures"]["utilisation"]
        points = _difference(on, off, lambda v: f"{v * 100:.1f} points", 0.0005, "higher", "lower")
        lines.append(f"useful utilisation: {on:.1%} with the rule, {off:.1%} without ({points})")
        lines.append(f"jobs completed: {rule['topology']['all']['completed']:,} with the rule, "
                     f"{none['topology']['all']['completed']:,} without")
        notes[policy] = lines
    return notes


def check_notes(results: dict) -> list[str]:
    notes = []
    for run in _ordered(results):
        t, c = run["topology"], run["counters"]
        line = (f"{LABELS[run['policy']]}: multi-node jobs never run with all their workers "
                f"{t['multi_node']['jobs'] - t['multi_node']['placed']}, placed more than once "
                f"{t['multi_node']['placed_again']}")
        if "rollbacks" in c:
            line += f"; rollbacks {c['rollbacks']}, failed controller writes {c['failed_actions']}"
        notes.append(line)
    return notes


def save(results: dict, path: Path) -> None:
    """The figures as JSON, to compare runs or write the Markdown again."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


def markdown(results: dict) -> str:
    setup, cluster, layout = results["setup"], results["setup"]["cluster"], results["setup"]["layout"]
    sizes = ", ".join(f"{count} of {size} GPUs" for size, count in setup["multi_node_sizes"].items())
    rules = rule_notes(results)
    sections = "\n\n".join(f"{LABELS[policy]}, against gangkeeper without a rule:\n\n"
                           + "\n".join(f"- {line}" for line in lines) for policy, lines in rules.items())
    checks = "\n".join(f"- {note}" for note in check_notes(results))
    walls = ", ".join(f"{run['policy']} {run['counters']['wall_seconds']} s" for run in results["runs"])
    block_gpus = layout["block_nodes"] * cluster["gpus_per_node"]
    return f"""## Topology: {setup['share']:.0%} of the multi-node jobs want one block, load {setup['load']:g}

`study/topology.py` (`gangkeeper bench topology`).
The study's trace at load {setup['load']:g} (offered {setup['offered_load']:.2f}): {setup['jobs']:,} jobs, seed
{setup['seed']} — the same jobs and arrivals as the main study's row for that load and the priority mix, without
priorities. {cluster['nodes']} nodes × {cluster['gpus_per_node']} GPUs ({setup['cluster_gpus']} GPUs) labelled in
{setup['zones']} zones (`{layout['zone_label']}`) of {layout['zone_nodes']} nodes, each of blocks
(`{layout['block_label']}`) of {layout['block_nodes']} nodes: {setup['blocks']} blocks of {block_gpus} GPUs,
so that the largest job fits one block but needs all of it.
Multi-node jobs (more GPUs than a node has, as 8-GPU workers): {setup['multi_node_jobs']} ({sizes}), holding
{setup['multi_node_gpu_share']:.0%} of the trace's GPU-seconds. **The sample**: {setup['declaring_jobs']} of them
({setup['share']:.0%}, a uniform sample drawn from the seed alone); only they carry a rule, written on their pod
templates: `gangkeeper.io/topology-preferred: {layout['block_label']}` (one block when the group fits in one
now, else as few as hold it) or `gangkeeper.io/topology-required: {layout['block_label']}` (wait for one block
that holds it, BestFit). gangkeeper without a rule is the product's default: the controller's cluster-level
preference for one zone when a group fits there (no rack label is configured by default), then its packing.
The stock scheduler reads no rule. Each replay runs {setup['drain_seconds'] / 3600:.0f} h past the last arrival.

- **Within one block**: a job whose workers, when all of them first ran together, were all on nodes of one
  block — read from the nodes the pods were bound to, not from the controller's decisions — over the jobs that
  ran with all their workers. The sample is the same jobs in every row, declaring a rule or not.
- **Queueing delay**: submission to all workers first running together (the main study's), over the jobs
  that started. **Useful utilisation** and **GPU-h held by partly placed jobs**: as in the main study
  (utilisation over the arrival span after its first {WARM_UP:.0%}).

{placement_table(results)}

{cost_table(results)}

{sections or "(gangkeeper without a rule was not run)"}

Checks:

{checks}

Reproduce: `gangkeeper bench topology` (seed {setup['seed']}); `--quick` replays 200 jobs on 16 nodes in blocks
of 8 to check that it works. Wall time of each replay: {walls}.
"""
