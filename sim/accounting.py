"""What a run of the emulated cluster cost: per job, when it was submitted, started and ended,
and how many GPU-seconds its pods held while the job could not run (waiting for the rest of
its pods: the waste partial placement causes) against those held while it trained.

A job is a workload (`Kind namespace/name`, see `sim.training.run_key`); it is submitted when
its workload object (or, for plain pods, its first pod) appears, starts when all its pods
first run together and ends when all have succeeded; a workload that runs in stages (see
`sim.training`) starts with its first and ends with its last, its GPU-seconds summed over all.
"""

from statistics import mean

from sim.api import WatchEvent
from sim.names import JOBS, JOBSETS, PODS, PYTORCHJOBS
from sim.training import Runs, run_key, stages


class Accounting:
    resources = (PYTORCHJOBS, JOBSETS, JOBS, PODS)

    def __init__(self):
        self.submitted: dict[str, float] = {}
        self.runs = Runs()

    def observe(self, event: WatchEvent, now: float) -> None:
        if event.type == "ADDED":
            self.submitted.setdefault(run_key(event.resource, event.object), now)
        if event.resource == PODS:
            self.runs.observe(event.object, event.type == "DELETED", now)

    def step(self, now: float) -> bool:
        return False

    def next_due(self) -> float | None:
        return None

    def jobs(self, now: float) -> list[dict]:
        """One row per job, GPU-seconds counted up to `now`."""
        self.runs.accrue_all(now)
        rows = []
        for key, submitted in self.submitted.items():
            run = stages(self.runs.runs.get(key))
            rows.append({"job": key, "submitted": submitted,
                         "started": next((s.started for s in run if s.started is not None), None),
                         "finished": run[-1].finished if run else None,
                         "useful_gpu_seconds": sum(s.useful_gpu_seconds for s in run),
                         "waiting_gpu_seconds": sum(s.waiting_gpu_seconds for s in run)})
        return rows

    def summary(self, now: float) -> dict:
        rows = self.jobs(now)
        useful = sum(r["useful_gpu_seconds"] for r in rows)
        waiting = sum(r["waiting_gpu_seconds"] for r in rows)
        started = [r for r in rows if r["started"] is not None]
        finished = [r for r in rows if r["finished"] is not None]
        return {
            "jobs": len(rows),
            "started": len(started),
            "finished": len(finished),
            "useful_gpu_seconds": useful,
            "waiting_gpu_seconds": waiting,
            "waste_fraction": waiting / (useful + waiting) if useful + waiting else 0.0,
            "mean_wait_seconds": mean(r["started"] - r["submitted"] for r in started) if started else None,
            "mean_completion_seconds": mean(r["finished"] - r["submitted"] for r in finished) if finished else None,
            "makespan_seconds": (max(r["finished"] for r in finished) - min(r["submitted"] for r in rows)
                                 if finished else None),
        }
