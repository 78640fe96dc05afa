"""Benchmark of /mutate over HTTPS against real gunicorn, relative to a no-op endpoint.

The server runs as `gangkeeper.webhook.server.serve` in a subprocess with the shipped gunicorn
settings, serving the product's app with one route added here: /noop (a constant answer after
the same transport checks) shows what TLS, gunicorn and Flask cost alone; the ratio of the two is what the policy, the envelope, the audit
line and the metrics add. The load comes from another process (a thread per connection,
persistent HTTPS connections through http.client, the API server's way), so that on a small
machine the client's GIL is never the server's.

Two modes: closed loop at several concurrency levels (throughput and latency; /mutate and /noop
alternate in slices on one server, so that the ratio is measured side by side), and an offered
rate (open loop: latency is measured from when a request was due, so a stalled server cannot
hide its queue). Worker classes and counts are compared in the same run.
"""

import datetime
import http.client
import ipaddress
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from flask import Flask, Response

from gangkeeper.certs.issue import issue
from gangkeeper.webhook.app import TransportError, create_app, read_body

LOOPBACK = "127.0.0.1"
_SERVE = ("import json, sys\nfrom gangkeeper.webhook.server import serve\nfrom bench.webhook import app_with_noop\n"
          "serve(json.loads(sys.argv[1]), app_factory=app_with_noop, **json.loads(sys.argv[2]))")
DEFAULT_SERVER = {"worker_class": "gthread", "workers": 2, "threads": 4}
# Slices of each closed-loop figure, /mutate and /noop alternating (`_levels`).
SLICES = 3
COMPARED_SERVERS = tuple({"worker_class": kind, "workers": count, "threads": 4 if kind == "gthread" else 1}
                         for kind in ("sync", "gthread") for count in (1, 2, 4))


# --- the request -------------------------------------------------------------------------


def worker_pod_review() -> dict:
    """A PyTorchJob worker asking for 8 GPUs, as the training operator creates it (~6 KB)."""
    env = [{"name": name, "value": value} for name, value in (
        ("MASTER_ADDR", "llm-pretrain-master-0"), ("MASTER_PORT", "23456"), ("WORLD_SIZE", "32"), ("RANK", "9"),
        ("PYTHONUNBUFFERED", "1"), ("NCCL_DEBUG", "WARN"), ("NCCL_IB_HCA", "mlx5_0,mlx5_1,mlx5_2,mlx5_3"),
        ("NCCL_SOCKET_IFNAME", "eth0"), ("NCCL_IB_GID_INDEX", "3"), ("NCCL_NET_GDR_LEVEL", "PHB"),
        ("CUDA_DEVICE_MAX_CONNECTIONS", "1"), ("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"),
        ("OMP_NUM_THREADS", "8"), ("HF_HOME", "/cache/huggingface"), ("DATASET_DIR", "/data/tokens"),
        ("CHECKPOINT_DIR", "/checkpoints/llm-pretrain"), ("WANDB_PROJECT", "llm-pretrain"))]
    env.append({"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}})
    mounts = [{"name": name, "mountPath": path} for name, path in (
        ("dshm", "/dev/shm"), ("dataset", "/data"), ("checkpoints", "/checkpoints"), ("hf-cache", "/cache"),
        ("train-config", "/etc/train"))]
    mounts.append({"name": "kube-api-access-x9k2q", "readOnly": True,
                   "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"})
    resources = {"cpu": "96", "memory": "1600Gi", "nvidia.com/gpu": "8", "rdma/hca_shared_devices_a": "4"}
    container = {
        "name": "pytorch", "image": "registry.example.com/ml/llm-pretrain:2026.11.3-cu128",
        "command": ["torchrun", "--nnodes=4", "--nproc-per-node=8", "/workspace/train.py",
                    "--config=/etc/train/config.yaml"],
        "ports": [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}],
        "env": env, "resources": {"limits": resources, "requests": dict(resources)}, "volumeMounts": mounts,
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent", "securityContext": {"capabilities": {"add": ["IPC_LOCK"]}},
    }
    volumes = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "256Gi"}},
        {"name": "dataset", "persistentVolumeClaim": {"claimName": "tokens-v7", "readOnly": True}},
        {"name": "checkpoints", "persistentVolumeClaim": {"claimName": "llm-pretrain-checkpoints"}},
        {"name": "hf-cache", "hostPath": {"path": "/mnt/nvme/hf-cache", "type": "DirectoryOrCreate"}},
        {"name": "train-config", "configMap": {"name": "llm-pretrain-config", "defaultMode": 420}},
        {"name": "kube-api-access-x9k2q", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                          "fieldPath": "metadata.namespace"}}]}}]}},
    ]
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}] + [
        {"key": f"node.kubernetes.io/{key}", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        for key in ("not-ready", "unreachable")]
    job_uid = "6f1c7c1e-8f31-4a44-9f7e-1b2f2c8e9a01"
    pod = {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": "llm-pretrain-worker-8", "namespace": "ml-training",
            "labels": {"training.kubeflow.org/job-name": "llm-pretrain",
                       "training.kubeflow.org/operator-name": "pytorchjob-controller",
                       "training.kubeflow.org/replica-index": "8", "training.kubeflow.org/replica-type": "worker"},
            "annotations": {"sidecar.istio.io/inject": "false"},
            "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "llm-pretrain",
                                 "uid": job_uid, "controller": True, "blockOwnerDeletion": True}],
            "managedFields": [{"manager": "training-operator", "operation": "Update", "apiVersion": "v1",
                               "time": "2026-11-30T09:38:38Z", "fieldsType": "FieldsV1",
                               "fieldsV1": _managed_fields(env, mounts, volumes)}],
        },
        "spec": {
            "volumes": volumes, "containers": [container], "restartPolicy": "OnFailure",
            "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
            "serviceAccount": "default", "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "securityContext": {}, "schedulerName": "default-scheduler", "tolerations": tolerations,
            "priorityClassName": "training", "priority": 1000, "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {},
    }
    return {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {
        "uid": "d6a9d5fe-fcf4-446f-b173-80cce40c3862",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "name": "llm-pretrain-worker-8", "namespace": "ml-training", "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kubeflow:training-operator",
                     "groups": ["system:serviceaccounts", "system:serviceaccounts:kubeflow", "system:authenticated"]},
        "object": pod, "oldObject": None, "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1", "fieldManager": "training-operator"},
    }}


def _managed_fields(env: list, mounts: list, volumes: list) -> dict:
    """The API server's record of who set which field, as it arrives with every CREATE."""
    def keyed(items, key):
        return {f'k:{{"{key}":"{item[key]}"}}': {".": {}, f"f:{key}": {}} for item in items}

    return {"f:metadata": {"f:labels": {".": {}}, "f:ownerReferences": {".": {}}},
            "f:spec": {"f:containers": {'k:{"name":"pytorch"}': {
                ".": {}, "f:command": {}, "f:env": {".": {}, **keyed(env, "name")}, "f:image": {},
                "f:resources": {".": {}, "f:limits": {}, "f:requests": {}},
                "f:volumeMounts": {".": {}, **keyed(mounts, "mountPath")}}},
                "f:volumes": {".": {}, **keyed(volumes, "name")}}}


# --- the server --------------------------------------------------------------------------


def app_with_noop(config: dict) -> Flask:
    """The product's app plus POST /noop, the baseline of what the transport alone costs: the
    same transport checks (content type, body read under the limit), then a constant answer —
    what any endpoint receiving an AdmissionReview must pay."""
    app = create_app(config)
    max_bytes = int(app.config["MAX_BODY_BYTES"])

    def noop() -> Response:
        try:
            read_body(max_bytes)
        except TransportError as error:
            return Response(json.dumps({"error": str(error)}), status=400, mimetype="application/json")
        return Response(b'{"ok":true}', mimetype="application/json")

    app.add_url_rule("/noop", "noop", noop, methods=["POST"])
    return app


class BenchServer:
    """The webhook under gunicorn with /noop on, in a subprocess, on a free loopback port.

    Separate from the launcher that the demo and the tests share (`demo.processes`), which runs
    `gangkeeper webhook`: the benchmark needs /noop and a chosen worker class and thread count,
    which the CLI deliberately does not expose, so this starts `gangkeeper.webhook.server.serve`
    itself.
    """

    def __init__(self, workdir: Path, worker_class: str, workers: int, threads: int):
        with socket.socket() as probe:
            probe.bind((LOOPBACK, 0))
            self.port = probe.getsockname()[1]
        # The audit log goes to stdout, as deployed (the container runtime collects it).
        app_config = {}
        settings = {"bind": LOOPBACK, "port": self.port, "workers": workers, "cert_dir": str(workdir),
                    "worker_class": worker_class, "threads": threads}
        self.log = open(workdir / f"server-{self.port}.log", "wb")
        self.process = subprocess.Popen([sys.executable, "-c", _SERVE, json.dumps(app_config), json.dumps(settings)],
                                        stdout=subprocess.DEVNULL, stderr=self.log)

    def wait_ready(self, ca_pem: bytes, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.poll() is None:
            try:
                connection = _connection(self.port, ca_pem)
                connection.request("GET", "/readyz")
                if connection.getresponse().status == 200:
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"benchmark server did not start; see {self.log.name}")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=30)
        self.log.close()


def _connection(port: int, ca_pem: bytes) -> http.client.HTTPSConnection:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    return http.client.HTTPSConnection(LOOPBACK, port, context=context, timeout=10)


# --- the load (runs in its own process) ----------------------------------------------------


def drive(port: int, ca_pem: bytes, path: str, body: bytes, connections: int, duration_s: float,
          rate: float = 0.0) -> dict:
    """Closed loop over `connections` persistent connections, or open loop at `rate` req/s: the
    latency of each request answered, the number that failed, the seconds driven."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    schedule = _Schedule(rate, time.perf_counter() + 0.05) if rate else None
    stop_at = time.perf_counter() + 0.05 + duration_s

    def client() -> None:
        connection = _connection(port, ca_pem)
        mine: list[float] = []
        while True:
            due = schedule.next_slot() if schedule else time.perf_counter()
            if due >= stop_at:
                break
            time.sleep(max(0.0, due - time.perf_counter()))
            mine.append(_one_request(connection, path, body, due, errors))
        with lock:
            latencies.extend(latency for latency in mine if latency >= 0)

    threads = [threading.Thread(target=client) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"latencies": latencies, "errors": errors[0], "duration_s": duration_s}


def _one_request(connection: http.client.HTTPSConnection, path: str, body: bytes, due: float, errors: list) -> float:
    try:
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        answer.read()
        if answer.status == 200:
            return time.perf_counter() - due
    except (OSError, http.client.HTTPException):
        connection.close()
    errors[0] += 1
    return -1.0


class _Schedule:
    """Request slots every 1/rate seconds, handed to whichever client thread is free."""

    def __init__(self, rate: float, start: float):
        self._interval, self._next, self._lock = 1.0 / rate, start, threading.Lock()

    def next_slot(self) -> float:
        with self._lock:
            slot, self._next = self._next, self._next + self._interval
            return slot


def _summary(*slices: dict) -> dict:
    """The figures of one endpoint over the slices that drove it."""
    ordered = sorted(latency for piece in slices for latency in piece["latencies"])
    errors, duration_s = sum(piece["errors"] for piece in slices), sum(piece["duration_s"] for piece in slices)

    def percentile(fraction: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000, 2) if ordered else 0.0

    return {"requests": len(ordered), "errors": errors, "rps": round(len(ordered) / duration_s, 1),
            "p50_ms": percentile(0.50), "p99_ms": percentile(0.99)}


# --- the run -----------------------------------------------------------------------------


def run(duration_s: float = 3.0, concurrency_levels=(1, 4, 16, 64), offered_rate: float = 500.0,
        compared_servers=COMPARED_SERVERS, compare_concurrency: int = 16, server=DEFAULT_SERVER) -> dict:
    """Every figure of the benchmark, measured in one run (see the module docstring)."""
    body = json.dumps(worker_pod_review(), separators=(",", ":")).encode()
    with tempfile.TemporaryDirectory(prefix="gangkeeper-bench-") as directory, \
            ProcessPoolExecutor(1, mp_context=get_context("spawn")) as load:
        workdir = Path(directory)
        ca_pem = _write_certificate(workdir)

        def measure(settings: dict, plans: list[tuple[str, int, float]]) -> list[dict]:
            bench_server = BenchServer(workdir, **settings)
            try:
                bench_server.wait_ready(ca_pem)
                return [load.submit(drive, bench_server.port, ca_pem, path, body, connections, seconds,
                                    rate).result() for path, connections, rate, seconds in plans]
            finally:
                bench_server.stop()

        levels = _levels(measure, server, concurrency_levels, offered_rate, duration_s)
        compared = [{**settings, **_summary(*measure(settings, [("/mutate", compare_concurrency, 0.0, duration_s)]))}
                    for settings in compared_servers]
    return {"cpus": os.cpu_count(), "payload_bytes": len(body), "duration_s": duration_s, "server": dict(server),
            "compare_concurrency": compare_concurrency, **levels, "servers": compared}


def _levels(measure, server: dict, concurrency_levels, offered_rate: float, duration_s: float) -> dict:
    """At each concurrency, /mutate and /noop in turn, SLICES times each on one server: a drift of
    the machine's speed during the run (other work, frequency) falls on both endpoints alike,
    where one long run of each would put it all on one side of the ratio."""
    piece = duration_s / SLICES
    plans = [(path, level, 0.0, piece) for level in concurrency_levels for _ in range(SLICES)
             for path in ("/mutate", "/noop")]
    plans += [(path, 32, offered_rate, duration_s) for path in ("/mutate", "/noop")]
    results = iter(measure(server, plans))
    levels = []
    for level in concurrency_levels:
        taken = [next(results) for _ in range(2 * SLICES)]
        mutate, noop = _summary(*taken[0::2]), _summary(*taken[1::2])
        levels.append({"concurrency": level, "mutate": mutate, "noop": noop,
                       "ratio": round(mutate["rps"] / noop["rps"], 2) if noop["rps"] else 0.0})
    mutate, noop = _summary(next(results)), _summary(next(results))
    return {"levels": levels, "offered": {"rate": offered_rate, "mutate": mutate, "noop": noop}}


def _write_certificate(workdir: Path) -> bytes:
    issued = issue("gangkeeper-webhook", "gangkeeper", datetime.datetime.now(datetime.timezone.utc), 1,
                   ips=(ipaddress.ip_address(LOOPBACK),))
    (workdir / "tls.crt").write_bytes(issued.tls_crt)
    (workdir / "tls.key").write_bytes(issued.tls_key)
    return issued.ca_crt


def markdown(results: dict) -> str:
    """The figures as a Markdown section for bench/RESULTS.md."""
    server = results["server"]
    lines = [
        "## Webhook: /mutate over HTTPS (gunicorn) vs a no-op endpoint",
        "",
        f"{results['cpus']} CPUs, load generator in a separate process on the same machine, persistent HTTPS "
        f"connections; body {results['payload_bytes']} bytes (8-GPU PyTorchJob worker pod); "
        f"{results['duration_s']} s per figure (closed loop: /mutate and /noop alternating in {SLICES} slices "
        f"each). Server: {server['workers']} × {server['worker_class']}"
        f" ({server['threads']} threads).",
        "",
        "| concurrency | /mutate req/s | p50 ms | p99 ms | /noop req/s | p50 ms | p99 ms | ratio | errors |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for level in results["levels"]:
        mutate, noop = level["mutate"], level["noop"]
        lines.append(f"| {level['concurrency']} | {mutate['rps']} | {mutate['p50_ms']} | {mutate['p99_ms']} | "
                     f"{noop['rps']} | {noop['p50_ms']} | {noop['p99_ms']} | {level['ratio']} | "
                     f"{mutate['errors'] + noop['errors']} |")
    offered = results["offered"]
    lines += ["", f"Offered rate {offered['rate']:g} req/s (open loop, latency from when each request was due):", "",
              "| endpoint | achieved req/s | p50 ms | p99 ms | errors |", "|---|---:|---:|---:|---:|"]
    for name in ("mutate", "noop"):
        figures = offered[name]
        lines.append(f"| /{name} | {figures['rps']} | {figures['p50_ms']} | {figures['p99_ms']} | {figures['errors']} |")
    lines += ["", f"Worker classes and counts, /mutate at concurrency {results['compare_concurrency']}:", "",
              "| worker class | workers | threads | req/s | p50 ms | p99 ms | errors |", "|---|---:|---:|---:|---:|---:|---:|"]
    for row in results["servers"]:
        lines.append(f"| {row['worker_class']} | {row['workers']} | {row['threads']} | {row['rps']} | "
                     f"{row['p50_ms']} | {row['p99_ms']} | {row['errors']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(run()))
