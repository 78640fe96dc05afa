"""Phase 2 on a real cluster (`gangkeeper demo --kubeconfig K`): submit and observe, nothing else.

gangkeeper (webhook and controller, `kubectl apply -k deploy/default`) and the Kubeflow training
operator must already be installed: the demo checks both and never starts or fakes either. It
creates its own namespace, labelled `gangkeeper.io/enforce=true`, submits the PyTorchJobs
(busybox containers that sleep `--train-seconds`, one GPU each), polls their pods once a second,
and deletes the namespace at the end, whatever happened. Figures are sampled from those polls, so
they are accurate to about a second; times are wall-clock seconds.
"""

from __future__ import annotations

import json
import secrets
import time

from demo.observe import Observer
from demo.scenario import PhaseResult, Settings
from gangkeeper import names
from gangkeeper.quantity import parse_quantity
from sim.names import GPU, PYTORCH_CONTAINER

POLL = 1.0
IMAGE = "busybox:1.36"


def pytorchjob(name: str, namespace: str, settings: Settings) -> dict:
    resources = {"limits": {GPU: "1"}, "requests": {GPU: "1", "cpu": "100m", "memory": "64Mi"}}
    template = {"spec": {"restartPolicy": "OnFailure", "containers": [{
        "name": PYTORCH_CONTAINER, "image": IMAGE, "command": ["sh", "-c", f"sleep {settings.train_seconds:.0f}"],
        "resources": resources}]}}
    replicas = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template}}
    if settings.workers_per_job > 1:
        replicas["Worker"] = {"replicas": settings.workers_per_job - 1, "restartPolicy": "OnFailure",
                              "template": template}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": name, "namespace": namespace}, "spec": {"pytorchReplicaSpecs": replicas}}


def raw(call, *args) -> dict:
    """The JSON answer as plain dicts: the typed models cost time and refuse fields some servers omit."""
    return json.loads(call(*args, _preload_content=False).data)


def phase2_on_cluster(settings: Settings, view, kubeconfig: str, *, timeout: float) -> PhaseResult:
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException

    api_client = config.new_client_from_config(config_file=kubeconfig)
    core, custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
    admission = client.AdmissionregistrationV1Api(api_client)
    try:
        admission.read_mutating_webhook_configuration(names.WEBHOOK_CONFIGURATION)
    except ApiException as error:
        raise RuntimeError(f"gangkeeper is not installed on this cluster (MutatingWebhookConfiguration "
                           f"{names.WEBHOOK_CONFIGURATION}: HTTP {error.status}); install it with "
                           "`kubectl apply -k deploy/default`, then run the demo again") from None
    capacity = sum(int(parse_quantity((n.get("status") or {}).get("allocatable", {}).get(GPU, "0")))
                   for n in raw(core.list_node)["items"])
    namespace = f"gangkeeper-demo-{secrets.token_hex(3)}"
    title = "Phase 2 · with gangkeeper (your cluster)"
    view.begin(title, [
        (f"Cluster: {capacity} {GPU} allocatable. Namespace {namespace} (labelled {names.ENFORCE_LABEL}="
         f"{names.ENFORCE_VALUE}, deleted at the end)."),
        (f"{settings.jobs} PyTorchJobs × {settings.workers_per_job} pods × 1 GPU ({IMAGE}, sleep "
         f"{settings.train_seconds:g} s). The installed webhook and controller do the rest; the demo only watches."),
    ])
    core.create_namespace({"metadata": {"name": namespace, "labels": {names.ENFORCE_LABEL: names.ENFORCE_VALUE}}})
    try:
        start = time.time()
        observer = Observer({n: settings.workers_per_job for n in settings.job_names}, capacity, start)
        for name in settings.job_names:
            try:
                custom.create_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs",
                                                       pytorchjob(name, namespace, settings))
            except ApiException as error:
                if error.status == 404:
                    raise RuntimeError("PyTorchJobs are not served by this cluster: install the Kubeflow training "
                                       "operator, then run the demo again") from None
                raise
        seen: dict[str, dict] = {}
        final = observer.snapshot(time.time())
        while time.time() - start < timeout:
            pods = {p["metadata"]["name"]: p for p in raw(core.list_namespaced_pod, namespace)["items"]}
            gangs = custom.list_namespaced_custom_object(names.GANG_GROUP, names.GANG_VERSION, namespace,
                                                         names.GANG_PLURAL)["items"]
            now = time.time()
            for gang in gangs:
                observer.observe_gang(gang, False, now)
            for name, pod in pods.items():
                observer.observe(pod, False, now)
            for name in set(seen) - set(pods):
                observer.observe(seen[name], True, now)
            seen = pods
            final = observer.snapshot(now)
            view.tick(final)
            if all(j.finished is not None for j in final.jobs):
                break
            time.sleep(POLL)
    finally:
        core.delete_namespace(namespace)
        view.say(f"namespace {namespace} deleted")
    total = settings.jobs * settings.workers_per_job
    seen_count, _, labelled = observer.creation_counts()
    finished = [j for j in final.jobs if j.finished is not None]
    stranded = sum(j.stranded_gpu_seconds for j in final.jobs)
    checks = [(f"all {total} pods labelled with their group by the webhook", seen_count == total and labelled == total),
              ("every job completed", len(finished) == len(final.jobs)),
              ("no GPU held by a job while any of its pods had no node (sampled each second)", stranded == 0)]
    verdict = (f"{len(finished)}/{len(final.jobs)} jobs completed in {final.at:.0f} s; GPU-seconds held while a pod "
               f"had no node: {stranded:.0f}.")
    result = PhaseResult(title, final, observer.timeline, settings.job_names, verdict, checks, controller_ran=True)
    view.end(result)
    return result
