"""`gangkeeper bench`: run the benchmarks and write their figures, with the machine they ran on.

Speed and memory targets are checked here, never by timed assertions in tests. The machines are
shared and noisy, so every section reports a ratio measured in one run (against a baseline
served the same way) beside the absolute figures, and the header records the machine's load.
"""

import argparse
import datetime
import os
import platform
import re
import time
from collections.abc import Callable
from pathlib import Path

from gangkeeper.config import add_flag

DEFAULT_RESULTS = "bench/RESULTS.md"
DESCRIPTION = """Run gangkeeper's benchmarks and studies and write their figures to --results.

Each section records when, with what command and on what machine it ran; the sections not
named keep their figures. Compare ratios measured within one run: the machines are shared.
--quick checks that the sections work; its figures measure nothing. controller-large (65,000
nodes: many minutes, about 2 GiB) runs only when named: `all` leaves it out."""


def _webhook(quick: bool) -> str:
    from bench import webhook as bench

    if quick:
        results = bench.run(duration_s=1.0, concurrency_levels=(1, 8), compared_servers=())
    else:
        results = bench.run()
    return bench.markdown(results)


def _store(quick: bool) -> str:
    from bench import store as bench_store

    nodes, pods = (500, 5_000) if quick else (5_000, 50_000)
    return bench_store.markdown(bench_store.run(nodes=nodes, pods=pods))


def _planner(quick: bool) -> str:
    from bench import planner as bench_planner

    sizes = (500,) if quick else (500, 2_000, 5_000)
    bound = 5_000 if quick else 50_000
    return bench_planner.markdown(bench_planner.run(nodes=sizes, bound_pods=bound, waiting_groups=500))


def _occupancy(quick: bool) -> str:
    from bench import occupancy as bench_occupancy

    sizes = (500,) if quick else (500, 5_000)
    bound = 5_000 if quick else 50_000
    return bench_occupancy.markdown(bench_occupancy.run(nodes=sizes, bound_pods=bound, waiting_groups=500))


def _controller(quick: bool) -> str:
    from bench import controller as bench_controller

    if quick:
        figures = bench_controller.run(nodes=(500,), bound_pods=5_000, waiting_groups=500, latency_groups=50)
    else:  # the scale: 500 / 5,000 / 15,000 nodes, 10 bound pods a node, 500 / 500 / 2,000 waiting groups
        figures = bench_controller.run(**bench_controller.SCALE, latency_groups=50)
    told = bench_controller.telling(waiting_pods=2_000 if quick else 10_000)
    return bench_controller.markdown(figures, told)


def _controller_large(quick: bool) -> str:
    from bench import controller as bench_controller

    if quick:
        figures = bench_controller.run(nodes=(1_000,), bound_pods=10_000, waiting_groups=100, latency_groups=10,
                                       compare_whole=False)
        held = bench_controller.memory(nodes=(500, 1_000), bound_pods=10_000, waiting_groups=100)
    else:  # 65,000 nodes, 650,000 bound pods, 5,000 waiting groups; memory at 5,000 and 65,000 nodes
        figures = bench_controller.run(**bench_controller.LARGE, latency_groups=50)
        held = bench_controller.memory()
    return bench_controller.large_markdown(figures, held)


def _fuzz(quick: bool) -> str:
    from bench import fuzz

    examples, server_examples = (300, 100) if quick else (3000, 300)
    return fuzz.markdown(fuzz.run(examples=examples, server_examples=server_examples, seed=20261130))


def _study(quick: bool) -> str:
    from study import report, run

    if quick:
        results = run.run(jobs=200, seed=20190710, cluster=run.Cluster(nodes=16), progress=print)
    else:
        results = run.run(jobs=2_000, seed=20190710, progress=print)
    directory = Path(DEFAULT_RESULTS).parent
    prefix = "study-quick" if quick else "study"
    paths = report.plot(results, directory, prefix)
    report.save(results, directory / f"{prefix}.json")
    return report.markdown(results, {name: path.name for name, path in paths.items()})


def _priorities(quick: bool) -> str:
    from study import priorities, priority_report, run

    if quick:
        results = priorities.run(jobs=200, seed=20190710, cluster=run.Cluster(nodes=16), progress=print)
    else:
        results = priorities.run(jobs=2_000, seed=20190710, progress=print)
    return priority_report.markdown(results)


def _topology(quick: bool) -> str:
    from study import run, topology, topology_report

    if quick:
        results = topology.run(jobs=200, seed=20190710, cluster=run.Cluster(nodes=16),
                               layout=topology.Layout(zone_nodes=16, block_nodes=8), progress=print)
    else:
        results = topology.run(jobs=2_000, seed=20190710, progress=print)
    topology_report.save(results, Path(DEFAULT_RESULTS).parent / ("topology-quick.json" if quick else "topology.json"))
    return topology_report.markdown(results)


def _autoscaling(quick: bool) -> str:
    from study import autoscaling, autoscaling_report

    if quick:
        results = autoscaling.run(jobs=40, seed=20190710, horizon=4 * 3600.0, progress=print)
    else:
        results = autoscaling.run(jobs=300, seed=20190710, progress=print)
    return autoscaling_report.markdown(results)


def _reliability(quick: bool) -> str:
    import tempfile

    from reliability import chaos, ha, report

    if quick:
        campaign = chaos.Campaign(jobs=15, kills=10, kill_interval=(1.5, 3.0), cut_watch_after=30, gone_every=5.0,
                                  deadline=180.0)
    else:
        campaign = chaos.Campaign()
    with tempfile.TemporaryDirectory(prefix="gangkeeper-chaos-") as workdir:
        campaign_result = chaos.run(Path(workdir), campaign, progress=print)
    with tempfile.TemporaryDirectory(prefix="gangkeeper-ha-") as workdir:
        failover = ha.run(Path(workdir), failovers=1 if quick else 3, progress=print)
    return report.reliability_markdown(campaign_result, failover)


def _load(quick: bool) -> str:
    import tempfile

    from reliability import load, report

    spec = load.Load(pods_per_minute=200, seconds=30.0, sample_seconds=1.0) if quick else load.Load()
    with tempfile.TemporaryDirectory(prefix="gangkeeper-load-") as workdir:
        return report.load_markdown(load.run(Path(workdir), spec, progress=print))


def _binding(quick: bool) -> str:
    import tempfile

    from reliability import binding, report

    spec = binding.Binding(sizes=(4, 16), groups=3, pause=0.1) if quick else binding.Binding()
    with tempfile.TemporaryDirectory(prefix="gangkeeper-binding-") as workdir:
        return report.binding_markdown(binding.run(Path(workdir), spec, progress=print))


SECTIONS: dict[str, Callable[[bool], str]] = {
    "webhook": _webhook,
    "store": _store,
    "planner": _planner,
    "occupancy": _occupancy,
    "controller": _controller,
    "controller-large": _controller_large,
    "fuzz": _fuzz,
    "study": _study,
    "priorities": _priorities,
    "topology": _topology,
    "autoscaling": _autoscaling,
    "reliability": _reliability,
    "load": _load,
    "binding": _binding,
}


_SECTION = re.compile(r"<!-- section: (?P<name>[a-z][a-z-]*) -->\n(?P<body>.*?)<!-- /section: (?P=name) -->\n", re.S)


def measured_section(name: str, body: str, command: str, load: tuple[float, float, float]) -> str:
    """One section's figures under a line saying when, how and on what machine they were measured
    (`load`: the load average when the section started)."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    stamp = (f"*Measured {now} with `{command}` on {os.cpu_count()} CPUs ({platform.machine()}, Python "
             f"{platform.python_version()}), load average at start {load[0]:.2f}.*\n\n")
    return f"<!-- section: {name} -->\n{stamp}{body.rstrip()}\n<!-- /section: {name} -->\n"


def merge(existing: str, fresh: dict[str, str]) -> str:
    """The results file with `fresh` sections replacing theirs and every other section kept, so
    that running one benchmark never throws away the figures of the others."""
    sections = {match["name"]: match.group(0) for match in _SECTION.finditer(existing)}
    sections.update(fresh)
    ordered = [name for name in SECTIONS if name in sections] + sorted(set(sections) - set(SECTIONS))
    return HEADER + "\n".join(sections[name] for name in ordered)


HEADER = ("# gangkeeper benchmarks\n\n"
          "Written by `make bench` (`gangkeeper bench`); `gangkeeper bench SECTION …` measures again only the "
          "sections named and keeps the others. Each section says when and with what command it was measured. "
          "The machines are shared and noisy: compare the ratios measured within one run, not absolute figures "
          "across runs.\n\n")


# Sections run only when named: they take many minutes and gigabytes (`bench all` leaves them out).
ON_REQUEST = frozenset({"controller-large"})


def _section(text: str) -> str:
    if text not in ("all", *SECTIONS):
        raise argparse.ArgumentTypeError(f"{text!r} is not a benchmark; choose from all, {', '.join(SECTIONS)}")
    return text


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("bench", help="run the benchmarks and write bench/RESULTS.md",
                                   description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sections", nargs="*", metavar="SECTION", type=_section,
                        help=f"which benchmarks to run: all (the default: every one but {', '.join(sorted(ON_REQUEST))}), "
                             f"{', '.join(SECTIONS)}")
    add_flag(parser, "--results", default=DEFAULT_RESULTS, help="Markdown file the figures are written to")
    parser.add_argument("--quick", action="store_true",
                        help="smaller sizes and shorter runs, to check that the benchmarks work")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    named = list(dict.fromkeys(args.sections))
    every = [name for name in SECTIONS if name not in ON_REQUEST] if not named or "all" in named else []
    chosen = list(dict.fromkeys(every + [name for name in named if name != "all"]))
    command = " ".join(["gangkeeper bench", *chosen, *(["--quick"] if args.quick else [])])
    results = Path(args.results)
    fresh = {}
    for name in chosen:
        started = time.monotonic()
        print(f"bench: {name} ...", flush=True)
        load = os.getloadavg()
        fresh[name] = measured_section(name, SECTIONS[name](args.quick), command, load)
        print(f"bench: {name} done in {time.monotonic() - started:.0f} s", flush=True)
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(merge(results.read_text() if results.exists() else "", fresh))
    print(f"bench: figures written to {results}")
    return 0
