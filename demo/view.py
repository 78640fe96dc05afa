"""The demo in the terminal: a rich live table per phase, or plain log lines (`--no-live`, for CI).

Both views take the same calls — begin a phase, tick with a snapshot, say a line, end the phase
with its result — and end with the same summary table.
"""

from __future__ import annotations

import time

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from demo.observe import JobView, Snapshot
from demo.scenario import PhaseResult

LOG_INTERVAL = 1.0  # wall seconds between two plain log lines while nothing starts or ends


def seconds(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f} s"


def job_table(snapshot: Snapshot, train_seconds: float) -> Table:
    table = Table(title=f"cluster time {snapshot.at:5.0f} s · GPUs held {snapshot.held_gpus}/{snapshot.capacity}",
                  title_justify="left", expand=False)
    for header, justify in (("job", "left"), ("running", "right"), ("pending", "right"), ("gated", "right"),
                            ("done", "right"), ("GPUs held", "right"), ("training progress", "left"),
                            ("state", "left")):
        table.add_column(header, justify=justify)
    for job in snapshot.jobs:
        progress = ProgressBar(total=train_seconds, completed=min(job.trained, train_seconds), width=24)
        table.add_row(job.name, f"{job.running}/{job.size}", str(job.pending), str(job.gated),
                      str(job.succeeded), str(job.held_gpus), progress, state(job))
    return table


def state(job: JobView) -> Text:
    if job.finished is not None:
        return Text("completed", style="green")
    if job.together:
        return Text("training", style="green")
    if job.held_gpus and job.pending:
        return Text("holding GPUs, waiting for the rest", style="bold red")
    if job.held_gpus:
        return Text("starting", style="yellow")
    if job.gated:
        return Text("gated, holds nothing", style="cyan")
    return Text("waiting")


def verdict_panel(result: PhaseResult) -> Panel:
    lines = [Text(result.verdict)]
    for claim, ok in result.checks:
        lines.append(Text(f"{'✔' if ok else '✘'} {claim}", style="green" if ok else "bold red"))
    return Panel(Group(*lines), title=result.title, border_style=result.tone if result.passed else "red")


class LiveView:
    def __init__(self, train_seconds: float, console: Console | None = None):
        self.console = console or Console()
        self.train_seconds = train_seconds
        self.live: Live | None = None

    def begin(self, title: str, lines: list[str]) -> None:
        self.console.rule(f"[bold]{title}")
        for line in lines:
            self.console.print(line)
        self.live = Live(Text("starting…"), console=self.console, refresh_per_second=8, transient=False)
        self.live.start()

    def tick(self, snapshot: Snapshot) -> None:
        if self.live:
            self.live.update(job_table(snapshot, self.train_seconds))

    def say(self, text: str) -> None:
        self.console.print(Text(text, style="dim"))

    def end(self, result: PhaseResult) -> None:
        if self.live:
            self.live.update(job_table(result.final, self.train_seconds))
            self.live.stop()
            self.live = None
        self.console.print(verdict_panel(result))

    def close(self) -> None:
        if self.live:
            self.live.stop()


class LogView:
    """One line per change of the cluster (at most one a second), for logs and CI."""

    def __init__(self, train_seconds: float, console: Console | None = None):
        self.console = console or Console(highlight=False, soft_wrap=True, width=max(Console().width, 120))
        self.train_seconds = train_seconds
        self.last_line, self.last_key, self.last_milestones = 0.0, None, None

    def begin(self, title: str, lines: list[str]) -> None:
        self.console.rule(title)
        for line in lines:
            self.console.print(line)
        self.last_key = self.last_milestones = None

    def tick(self, snapshot: Snapshot, *, force: bool = False) -> None:
        key = tuple((j.running, j.pending, j.gated, j.held_gpus, j.succeeded) for j in snapshot.jobs)
        milestones = tuple((j.started, j.finished) for j in snapshot.jobs)
        if key == self.last_key or (not force and milestones == self.last_milestones
                                    and time.monotonic() - self.last_line < LOG_INTERVAL):
            return
        self.last_key, self.last_milestones, self.last_line = key, milestones, time.monotonic()
        jobs = " | ".join(f"{j.name}: {j.running}/{j.size} running, {j.pending} pending, {j.gated} gated, "
                          f"{j.succeeded} done, {j.held_gpus} GPUs, trained {j.trained:.0f}/{self.train_seconds:g} s"
                          for j in snapshot.jobs)
        self.console.print(f"[t={snapshot.at:6.1f} s] {jobs} | held {snapshot.held_gpus}/{snapshot.capacity}",
                           markup=False)

    def say(self, text: str) -> None:
        self.console.print(f"  {text}", markup=False)

    def end(self, result: PhaseResult) -> None:
        self.tick(result.final, force=True)
        self.console.print(f"RESULT {result.title}: {result.verdict}", markup=False)
        for claim, ok in result.checks:
            self.console.print(f"  [{'ok' if ok else 'FAILED'}] {claim}", markup=False)

    def close(self) -> None:
        return None


def summary_table(results: list[PhaseResult], speed: float) -> Table:
    table = Table(title="Summary (times in cluster seconds, from submission)", title_justify="left")
    for header, justify in (("phase", "left"), ("job", "left"), ("waited", "right"), ("ran", "right"),
                            ("GPU·s stranded¹", "right"), ("GPU·s starting²", "right"), ("outcome", "left")):
        table.add_column(header, justify=justify)
    for result in results:
        for job in result.final.jobs:
            waited = (seconds(job.started - job.submitted) if job.started is not None
                      else f"> {result.final.at:.0f} s")
            ran = seconds(job.finished - job.started) if job.finished is not None and job.started is not None else "—"
            outcome = ("completed" if job.finished is not None else
                       "training" if job.together else
                       "gated" if job.gated == job.size else
                       f"stuck: {job.running}/{job.size} running")
            table.add_row(result.title.split(" · ")[0], job.name, waited, ran, f"{job.stranded_gpu_seconds:.0f}",
                          f"{job.starting_gpu_seconds:.0f}", outcome)
    table.caption = (
        "¹ GPUs held by the job while some of its pods had no node (neither bound nor reserved): the deadlock's waste.\n"
        "² GPUs held while every pod had a node, bound or reserved, but not all ran yet (release, container start).\n"
        f"Cluster time runs ×{speed:g}: the real webhook's and controller's wall-clock latency counts ×{speed:g} too.")
    table.caption_justify = "left"
    return table
