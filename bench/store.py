"""How the emulated API server holds a large cluster: list latency and memory at 5,000 nodes, 50,000 pods.

`run()` is called by the bench harness; `python -m bench.store` prints its result.
"""

import json
import resource
import statistics
import time
import tracemalloc

from sim.apiserver import APIServer

_NAMESPACES = 50


def _node(i: int) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}", "labels": {"zone": f"z{i % 10}"}},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}}}


def _pod(i: int, nodes: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"pod-{i}", "labels": {"app": f"job-{i // 8}", "tier": "train"}},
            "spec": {"nodeName": f"node-{i % nodes}", "containers": [
                {"name": "c", "image": "trainer:1", "resources": {"limits": {"cpu": "4", "memory": "16Gi",
                                                                             "nvidia.com/gpu": "1"}}}]}}


def _timed(call, repeat: int = 5) -> float:
    """Median wall time of `call` in milliseconds."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(samples), 2)


def run(nodes: int = 5000, pods: int = 50000) -> dict:
    """Fill an APIServer through its full write pipeline, then time the lists controllers make."""
    tracemalloc.start()
    started = time.perf_counter()
    api = APIServer()
    for n in range(_NAMESPACES):
        api.create("namespaces", {"metadata": {"name": f"ns-{n}"}})
    for i in range(nodes):
        api.create("nodes", _node(i))
    for i in range(pods):
        api.create("pods", _pod(i, nodes), namespace=f"ns-{i % _NAMESPACES}")
    fill_seconds = time.perf_counter() - started
    traced_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return {
        "nodes": nodes, "pods": pods,
        "fill_seconds": round(fill_seconds, 2),
        "writes_per_second": round((nodes + pods) / fill_seconds),
        "list_all_pods_ms": _timed(lambda: api.select(api.kind("pods"), None), 3),
        "list_all_pods_copied_ms": _timed(lambda: api.list("pods"), 1),
        "list_namespace_ms": _timed(lambda: api.select(api.kind("pods"), "ns-7")),
        "list_by_label_ms": _timed(lambda: api.select(api.kind("pods"), None, "app=job-42")),
        "list_by_node_ms": _timed(lambda: api.select(api.kind("pods"), None, "", "spec.nodeName=node-17")),
        "list_all_pods_json_ms": _timed(lambda: json.dumps(api.select(api.kind("pods"), None)[0]), 1),
        "store_traced_mb": round(traced_bytes / 2**20, 1),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def markdown(figures: dict) -> str:
    """The figures of `run` as the results file shows them."""
    rows = [
        ("fill through the full write pipeline",
         f"{figures['fill_seconds']} s ({figures['writes_per_second']} writes/s)"),
        ("list all pods (no copies)", f"{figures['list_all_pods_ms']} ms"),
        ("list all pods (copies, as the in-process API returns them)", f"{figures['list_all_pods_copied_ms']} ms"),
        ("list one namespace", f"{figures['list_namespace_ms']} ms"),
        ("list by label", f"{figures['list_by_label_ms']} ms"),
        ("list by spec.nodeName", f"{figures['list_by_node_ms']} ms"),
        ("JSON of all pods (what an HTTP list serialises)", f"{figures['list_all_pods_json_ms']} ms"),
        ("store memory (tracemalloc)", f"{figures['store_traced_mb']} MiB"),
        ("peak RSS of the process", f"{figures['max_rss_mb']} MiB"),
    ]
    table = "\n".join(f"| {what} | {value} |" for what, value in rows)
    return (f"## Cluster emulation: {figures['nodes']:,} nodes and {figures['pods']:,} pods in memory\n\n"
            f"`bench/store.py`. Lists as the controller's informers make them.\n\n"
            f"| measure | result |\n|---|---|\n{table}\n")


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
