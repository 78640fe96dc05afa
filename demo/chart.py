"""The timeline PNG: GPUs held per job over cluster time, one panel per phase."""

from __future__ import annotations

from pathlib import Path

from demo.scenario import PhaseResult

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


def write_chart(results: list[PhaseResult], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(1, len(results), figsize=(6.5 * len(results), 4.2), sharey=True, squeeze=False)
    for axis, result in zip(axes[0], results):
        times = [t for t, _ in result.timeline] + [result.final.at]
        series = [[held[i] for _, held in result.timeline] for i in range(len(result.job_names))]
        series = [s + [s[-1]] for s in series]
        axis.stackplot(times, *series, step="post", labels=result.job_names,
                       colors=COLOURS[:len(series)], alpha=0.85)
        axis.axhline(result.final.capacity, color="black", linestyle="--", linewidth=1)
        axis.text(0, result.final.capacity, f" cluster: {result.final.capacity} GPUs", va="bottom", fontsize=8)
        for index, job in enumerate(result.final.jobs):
            for moment, word in ((job.started, "all running"), (job.finished, "done")):
                if moment is not None:
                    axis.axvline(moment - job.submitted, color=COLOURS[index % len(COLOURS)], linestyle=":",
                                 linewidth=1)
                    axis.text(moment - job.submitted, result.final.capacity * (0.9 - 0.08 * index),
                              f" {job.name} {word}", fontsize=7, color=COLOURS[index % len(COLOURS)])
        stranded = sum(j.stranded_gpu_seconds for j in result.final.jobs)
        axis.set_title(f"{result.title}\nGPU·s held by jobs with pods left without a node: {stranded:.0f}",
                       fontsize=10)
        axis.set_xlabel("cluster time (s)")
        axis.set_xlim(0, max(result.final.at, 1))
        axis.set_ylim(0, result.final.capacity * 1.15)
        axis.legend(loc="lower right", fontsize=8)
    axes[0][0].set_ylabel("GPUs held")
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    pyplot.close(figure)
    return path
