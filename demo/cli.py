"""`gangkeeper demo`: the deadlock of two training jobs on the stock scheduler, then the same
jobs with gangkeeper's real webhook and controller, on the built-in cluster emulation."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from gangkeeper.config import add_bool_flag, add_flag, env_name, int_in_range, positive_number


def _flag(parser, flag: str, **kwargs) -> None:
    add_flag(parser, flag, env=env_name(f"--demo-{flag.lstrip('-')}"), **kwargs)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "demo", help="show the deadlock gangkeeper prevents, then gangkeeper preventing it",
        description="Phase 1: two PyTorchJobs on an emulated cluster with the stock kube-scheduler deadlock, each "
                    "holding GPUs while waiting for the rest. Phase 2: the same jobs with the real gangkeeper "
                    "webhook (gunicorn over TLS) and controller: one job runs whole, then the other. Ends with a "
                    "summary table and a timeline chart. With --kubeconfig, phase 2 runs on a real cluster "
                    "instead, where gangkeeper and the Kubeflow training operator must already be installed.")
    _flag(parser, "--nodes", default=6, type=int_in_range(1, 1000, "a number of nodes"), help="emulated GPU nodes")
    _flag(parser, "--gpus-per-node", default=8, type=int_in_range(1, 64, "a number of GPUs"), help="GPUs per node")
    _flag(parser, "--workers-per-job", default=32, type=int_in_range(1, 4096, "a number of pods"),
          help="pods per PyTorchJob, one GPU each")
    _flag(parser, "--jobs", default=2, type=int_in_range(1, 26, "a number of jobs"), help="PyTorchJobs submitted")
    _flag(parser, "--phase1-seconds", default=30.0, type=positive_number,
          help="cluster seconds to watch the stock scheduler before calling it")
    _flag(parser, "--train-seconds", default=45.0, type=positive_number,
          help="cluster seconds of training each job needs, counted while all its pods run")
    _flag(parser, "--speed", default=3.0, type=positive_number,
          help="how many times faster than real time the emulated cluster runs")
    _flag(parser, "--chart", default="demo-timeline.png", help="where to write the timeline PNG")
    _flag(parser, "--workdir", default="", help="where the webhook/controller logs, certificates and kubeconfig go "
                                                "(empty: a new temporary directory, kept and printed)")
    _flag(parser, "--kubeconfig", default="", help="run phase 2 on this real cluster instead of the emulation "
                                                   "(submits and observes only; see the README)")
    _flag(parser, "--timeout", default=1800.0, type=positive_number,
          help="with --kubeconfig: seconds to wait for both jobs before giving up")
    add_bool_flag(parser, "--no-live", env=env_name("--demo-no-live"),
                  help="print plain log lines instead of the live terminal view (for CI and logs)")
    parser.set_defaults(run=run)


def settings_from(args: argparse.Namespace):
    from demo.scenario import Settings

    return Settings(nodes=args.nodes, gpus_per_node=args.gpus_per_node, workers_per_job=args.workers_per_job,
                    jobs=args.jobs, phase1_seconds=args.phase1_seconds, train_seconds=args.train_seconds,
                    speed=args.speed)


def run(args: argparse.Namespace) -> int:
    from demo import chart, scenario
    from demo import view as views

    settings = settings_from(args)
    view = (views.LogView if args.no_live else views.LiveView)(settings.train_seconds)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="gangkeeper-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        if args.kubeconfig:
            from demo import remote

            results.append(remote.phase2_on_cluster(settings, view, args.kubeconfig, timeout=args.timeout))
        else:
            results.append(scenario.phase1(settings, view))
            results.append(scenario.phase2(settings, view, workdir))
    except KeyboardInterrupt:
        view.close()
        view.console.print("interrupted")
        return 130
    except RuntimeError as error:  # a process that did not start, a cluster without what the demo needs
        view.close()
        view.console.print(f"gangkeeper demo: {error}", markup=False)
        return 1
    finally:
        view.close()
    view.console.print(views.summary_table(results, 1.0 if args.kubeconfig else settings.speed))
    path = chart.write_chart(results, Path(args.chart))
    view.console.print(f"timeline chart: {path}")
    if not args.kubeconfig:
        view.console.print(f"webhook and controller logs, certificates, kubeconfig: {workdir}")
    failed = [claim for result in results for claim, ok in result.checks if not ok]
    if failed:
        view.console.print(f"[bold red]{len(failed)} claim(s) did not hold:[/] " + "; ".join(failed))
        return 1
    return 0
