"""The scenario file: which nodes the emulated cluster has, which workloads arrive and when.

```yaml
nodes:
  - count: 6
    gpusPerNode: 8
    cpu: "64"
    memory: 512Gi
    labels: {pool: a100, topology.kubernetes.io/zone: a}
    taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
  - count: 64
    topology:               # optional: consecutive nodes share a domain of each label, outermost first
      - {label: topology.kubernetes.io/zone, nodes: 32, values: [b, c]}   # 2 zones of 32 nodes
      - {label: example.com/rack, nodes: 8}             # 4 racks of 8 per zone: rack-0 … rack-7
      - {label: nvidia.com/gpu.clique, nodes: 4, prefix: nvl}   # nvl-0 … nvl-15
  - count: 2
    gpusPerNode: 0
    devices:                # DRA: a ResourceSlice per node and a DeviceClass per driver
      count: 8
      driver: gpu.example.com
      extendedResourceName: nvidia.com/gpu   # optional: the class also serves this resource
      attributes: {model: h100}
nodeGroups:                # optional: node groups the emulated cluster-autoscaler grows and shrinks
  - name: gpu-pool          # its nodes are gpu-pool-0, gpu-pool-1, ...
    min: 0                  # the nodes it starts with, and never goes below (default 0)
    max: 8
    provisioningSeconds: 60 # from a scale-up to the node Ready (default 60)
    gpusPerNode: 8          # and cpu, memory, pods, labels, taints, gpuResource: as for nodes
priorityClasses:           # optional: PriorityClasses the workloads name
  - {name: urgent, value: 1000}
  - {name: polite, value: 1000, preemptionPolicy: Never}
workloads:
  - kind: PyTorchJob        # PyTorchJob, JobSet, Job or Pod
    name: llm-a
    namespace: ml-training
    size: 32                # pods
    gpusPerPod: 1
    durationSeconds: 600    # training progress needed; omit for pods that run until deleted
    submitSeconds: 0        # after the start of the run
    priorityClassName: urgent   # optional: one of priorityClasses, or a system class
    topology: {required: topology.kubernetes.io/zone, preferred: example.com/rack,   # optional:
               sliceRequired: nvidia.com/gpu.clique, sliceSize: 4}   # the pods' gangkeeper.io/topology-*
```

Loading returns every problem at once, each naming the field, the bad value and what is
accepted. Building turns the spec into Node and workload manifests; the workloads' pod templates
carry the sim annotations (run size, duration) that the emulated kubelet reads; node groups
with `devices` also give a DeviceClass per driver and a ResourceSlice per node. With `nodeGroups`,
`emulated_cluster` starts the emulated cluster-autoscaler (`sim.autoscaler`) with them, each
group's `min` nodes created with the cluster; `nodes` may then be empty.

A node group's `topology` labels its nodes in domains: the n-th node of the group (from 0) has
the level's `values[n // nodes]`, or `{prefix}-{k}` with k numbering the label's domains on
across the whole spec (so two groups never share a generated domain; the prefix defaults to the
last part of the label: `rack`, `gpu.clique`). Each level's `nodes` divides the group's count and
the level before it, so that the domains nest. A workload's `topology` is written on its pods as
the `gangkeeper.io/topology-*` annotations.
"""

from dataclasses import dataclass

import yaml
from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate, validates_schema

from gangkeeper import names
from gangkeeper.names import GROUP_LABEL, MIN_COUNT_ANNOTATION
from sim.autoscaler import NodeGroup
from sim.names import (
    DEVICE_CLASSES,
    DURATION_ANNOTATION,
    GPU,
    HOSTNAME_LABEL,
    JOB_API_VERSION,
    JOBS,
    JOBSET_API_VERSION,
    JOBSETS,
    PODS,
    PYTORCH_CONTAINER,
    PYTORCHJOB_API_VERSION,
    PYTORCHJOBS,
    RESOURCE_API_VERSION,
    RESOURCE_SLICES,
    WORLD_SIZE_ANNOTATION,
)
from sim.priority import DEFAULT_PREEMPTION, HIGHEST_USER_DEFINABLE, POLICIES, SYSTEM_CLASSES
from sim.quantity import EXAMPLES, parse_quantity
from sim.selectors import is_label_key

LABEL_KEY_RULE = (
    "a label key such as topology.kubernetes.io/zone: an optional prefix (a lowercase DNS subdomain of at most "
    "253 characters) and '/', then a name of at most 63 characters: letters, digits, '-', '_' or '.', starting "
    "and ending with a letter or digit"
)
KINDS = ("PyTorchJob", "JobSet", "Job", "Pod")
EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
IMAGE = "registry.example/train:latest"
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
MAX_COUNT = 100_000
DEFAULT_PROVISIONING_SECONDS = 60.0  # from scale-up to a Ready node, unless a node group says


class SpecError(ValueError):
    """Every problem of a spec file, one `path: message` per line."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


def whole(minimum: int, maximum: int = MAX_COUNT, **options) -> fields.Integer:
    return fields.Integer(strict=True, validate=validate.Range(
        min=minimum, max=maximum, error="{input} is out of range; use a whole number from {min} to {max}"),
        error_messages={"invalid": "{input!r} is not a whole number"}, **options)


def seconds(minimum: float, **options) -> fields.Float:
    return fields.Float(validate=validate.Range(
        min=minimum, min_inclusive=minimum == 0, error="{input} is out of range; use a number of seconds above 0"
        if minimum else "{input} is out of range; use a number of seconds, 0 or more"),
        error_messages={"invalid": "{input!r} is not a number of seconds"}, **options)


def dns_label(**options) -> fields.String:
    return fields.String(validate=validate.Regexp(
        DNS_LABEL, error="{input!r} is not a DNS label; use lowercase letters, digits and '-'"), **options)


class Quantity(fields.String):
    """A Kubernetes quantity, kept as written and checked with the API server's grammar."""

    def _deserialize(self, value, attr, data, **kwargs):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        text = super()._deserialize(value, attr, data, **kwargs)
        try:
            parse_quantity(text)
        except ValueError:
            raise ValidationError(f"{value!r} is not a Kubernetes quantity ({EXAMPLES})") from None
        return text


class StrictSchema(Schema):
    """Unknown fields are reported with the fields that would be accepted."""

    class Meta:
        unknown = EXCLUDE

    @validates_schema(pass_original=True, skip_on_field_errors=False)
    def no_unknown_fields(self, data, original, **kwargs):
        if not isinstance(original, dict):
            return
        accepted = ", ".join(sorted(self.fields))
        errors = {key: [f"unknown field (value {value!r}); accepted fields: {accepted}"]
                  for key, value in original.items() if key not in self.fields}
        if errors:
            raise ValidationError(errors)


class TaintSchema(StrictSchema):
    key = fields.String(required=True)
    value = fields.String(load_default="")
    effect = fields.String(required=True, validate=validate.OneOf(
        EFFECTS, error="{input!r} is not a taint effect; use one of {choices}"))


class DevicesSchema(StrictSchema):
    count = whole(1, 1024, required=True)
    driver = fields.String(load_default="gpu.example.com", validate=validate.Regexp(
        DNS_SUBDOMAIN, error="{input!r} is not a driver name; use a DNS subdomain such as gpu.example.com"))
    extendedResourceName = fields.String(load_default=None)
    attributes = fields.Dict(keys=fields.String(), values=fields.String(), load_default=dict)


def label_key(**options) -> fields.String:
    return fields.String(validate=must_be_label_key, **options)


def must_be_label_key(value: str) -> None:
    if not is_label_key(value):
        raise ValidationError(f"{value!r} is not a label key; write {LABEL_KEY_RULE}")


class TopologyLevelSchema(StrictSchema):
    label = label_key(required=True)
    nodes = whole(1, required=True)
    values = fields.List(fields.String(), load_default=None)
    prefix = fields.String(load_default=None)


class NodeGroupSchema(StrictSchema):
    count = whole(1, required=True)
    namePrefix = dns_label(load_default="node")
    gpusPerNode = whole(0, 1024, load_default=8)
    gpuResource = fields.String(load_default=GPU)
    cpu = Quantity(load_default="64")
    memory = Quantity(load_default="512Gi")
    pods = whole(1, 10_000, load_default=110)
    labels = fields.Dict(keys=fields.String(), values=fields.String(), load_default=dict)
    taints = fields.List(fields.Nested(TaintSchema), load_default=list)
    devices = fields.Nested(DevicesSchema, load_default=None)
    topology = fields.List(fields.Nested(TopologyLevelSchema), load_default=list)

    @validates_schema(skip_on_field_errors=True)
    def domains_nest(self, data, **kwargs):
        outer, problems = data.get("count"), {}
        for position, level in enumerate(data.get("topology", ())):
            where = "the group's count" if position == 0 else f"topology[{position - 1}].nodes"
            if outer % level["nodes"]:
                problems[position] = {"nodes": [f"{level['nodes']} does not divide {where} ({outer}); "
                                                f"use a divisor of it, so that the domains nest"]}
            elif level["values"] is not None and len(level["values"]) != data["count"] // level["nodes"]:
                problems[position] = {"values": [f"{len(level['values'])} values for {data['count'] // level['nodes']} "
                                                 f"domains of {level['nodes']} nodes; give one value per domain"]}
            outer = level["nodes"]
        if problems:
            raise ValidationError({"topology": problems})


class AutoscaledGroupSchema(NodeGroupSchema):
    """Nodes of one shape that the emulated cluster-autoscaler adds and removes (`sim.autoscaler`)."""

    class Meta(NodeGroupSchema.Meta):
        exclude = ("count", "namePrefix", "devices", "topology")

    name = dns_label(required=True)
    min = whole(0, load_default=0)
    max = whole(1, required=True)
    provisioningSeconds = seconds(0, load_default=DEFAULT_PROVISIONING_SECONDS)

    @validates_schema(skip_on_field_errors=True)
    def min_is_at_most_max(self, data, **kwargs):
        if data["min"] > data["max"]:
            raise ValidationError(f"{data['min']} is above max {data['max']}; use a min from 0 to {data['max']}", "min")


class WorkloadTopologySchema(StrictSchema):
    required = label_key(load_default=None)
    preferred = label_key(load_default=None)
    sliceRequired = label_key(load_default=None)
    sliceSize = whole(1, load_default=None)

    @validates_schema(skip_on_field_errors=True)
    def slices_need_both(self, data, **kwargs):
        if (data["sliceRequired"] is None) != (data["sliceSize"] is None):
            missing = "sliceSize" if data["sliceSize"] is None else "sliceRequired"
            raise ValidationError(f"sliceRequired and sliceSize go together; add {missing}", missing)


class WorkloadSchema(StrictSchema):
    kind = fields.String(required=True, validate=validate.OneOf(
        KINDS, error="{input!r} is not a workload kind; use one of {choices}"))
    name = dns_label(load_default=None)
    namespace = dns_label(load_default="default")
    size = whole(1, required=True)
    podsPerJob = whole(1, load_default=1)
    gpusPerPod = whole(0, 1024, load_default=1)
    cpuPerPod = Quantity(load_default="1")
    memoryPerPod = Quantity(load_default="4Gi")
    durationSeconds = seconds(0.001, load_default=None)
    submitSeconds = seconds(0, load_default=0.0)
    priorityClassName = fields.String(load_default=None)
    topology = fields.Nested(WorkloadTopologySchema, load_default=None)

    @validates_schema(skip_on_field_errors=True)
    def slice_size_divides_size(self, data, **kwargs):
        size = (data["topology"] or {}).get("sliceSize")
        if size and data["size"] % size:
            raise ValidationError({"topology": {"sliceSize": [
                f"{size} does not divide size {data['size']}; use a divisor of the size"]}})

    @validates_schema(skip_on_field_errors=True)
    def pods_per_job_divides_size(self, data, **kwargs):
        if data["size"] % data["podsPerJob"]:
            raise ValidationError(
                f"{data['podsPerJob']} does not divide size {data['size']}; use a divisor of the size",
                "podsPerJob")
        if data["podsPerJob"] != 1 and data["kind"] != "JobSet":
            raise ValidationError(f"{data['podsPerJob']} is only accepted for kind JobSet; remove it",
                                  "podsPerJob")


class PriorityClassSchema(StrictSchema):
    name = fields.String(required=True, validate=validate.Regexp(
        DNS_SUBDOMAIN, error="{input!r} is not a DNS subdomain; use lowercase letters, digits, '-' and '.'"))
    value = fields.Integer(strict=True, required=True, validate=validate.Range(
        min=-2_147_483_648, max=HIGHEST_USER_DEFINABLE,
        error="{input} is out of range; use a whole number from {min} to {max}"))
    preemptionPolicy = fields.String(load_default=DEFAULT_PREEMPTION, validate=validate.OneOf(
        POLICIES, error="{input!r} is not a preemption policy; use one of {choices}"))
    globalDefault = fields.Boolean(load_default=False)


class SpecSchema(StrictSchema):
    nodes = fields.List(fields.Nested(NodeGroupSchema), required=True)
    nodeGroups = fields.List(fields.Nested(AutoscaledGroupSchema), load_default=list)
    workloads = fields.List(fields.Nested(WorkloadSchema), load_default=list)
    priorityClasses = fields.List(fields.Nested(PriorityClassSchema), load_default=list)

    @validates_schema(skip_on_field_errors=True)
    def has_nodes(self, data, **kwargs):
        if not data["nodes"] and not data["nodeGroups"]:
            raise ValidationError("an empty list has no nodes; list at least one node group", "nodes")


def flatten(messages, path: str = "") -> list[str]:
    """marshmallow's nested error dict as `nodes[0].count: message` lines."""
    if isinstance(messages, dict):
        problems = []
        for key, value in messages.items():
            step = f"[{key}]" if isinstance(key, int) else (f".{key}" if path else key)
            problems += flatten(value, f"{path}{step}" if key != "_schema" else path)
        return problems
    if isinstance(messages, list) and all(isinstance(m, str) for m in messages):
        return [f"{path or 'spec'}: {message}" for message in messages]
    return [f"{path or 'spec'}: {messages}"]


def load(text: str) -> dict:
    """Parse and check a spec; raise SpecError listing every problem."""
    return check(parse(text))


def parse(text: str):
    """The YAML document of a spec, not yet checked."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise SpecError([f"spec: not valid YAML: {error}"]) from None


def check(document) -> dict:
    """Check a parsed spec; raise SpecError listing every problem."""
    if not isinstance(document, dict):
        raise SpecError([f"spec: {document!r} is not a mapping; write a mapping with `nodes` and `workloads`"])
    try:
        spec = SpecSchema().load(document)
    except ValidationError as error:
        raise SpecError(flatten(error.messages)) from None
    name_workloads(spec["workloads"])
    one_class_per_driver(spec["nodes"])
    known_priority_classes(spec)
    node_names_apart(spec)
    return spec


def node_names_apart(spec: dict) -> None:
    """Refuse two autoscaled groups of one name, and a group named as static nodes are: their nodes'
    names would meet."""
    prefixes = {group["namePrefix"]: position for position, group in enumerate(spec["nodes"])}
    seen: dict[str, int] = {}
    problems = []
    for position, group in enumerate(spec["nodeGroups"]):
        name = group["name"]
        if name in seen:
            problems.append(f"nodeGroups[{position}].name: {name!r} is already the name of nodeGroups[{seen[name]}]; "
                            f"give each node group its own name")
        elif name in prefixes:
            problems.append(f"nodeGroups[{position}].name: {name!r} is the namePrefix of nodes[{prefixes[name]}], "
                            f"whose nodes are named {name}-N too; give the group another name")
        seen.setdefault(name, position)
    if problems:
        raise SpecError(problems)


def known_priority_classes(spec: dict) -> None:
    """Refuse a workload naming a PriorityClass the spec does not list (the system ones aside)."""
    known = {c["name"] for c in spec["priorityClasses"]} | {c["name"] for c in SYSTEM_CLASSES}
    problems = [f"workloads[{position}].priorityClassName: {workload['priorityClassName']!r} is not a PriorityClass "
                f"of the spec; use one of {sorted(known)}, or list it under priorityClasses"
                for position, workload in enumerate(spec["workloads"])
                if workload["priorityClassName"] is not None and workload["priorityClassName"] not in known]
    if problems:
        raise SpecError(problems)


def name_workloads(workloads: list[dict]) -> None:
    """Give unnamed workloads `{kind}-{position}`; refuse two workloads with one name."""
    seen: dict[tuple, int] = {}
    problems = []
    for position, workload in enumerate(workloads):
        workload["name"] = workload["name"] or f"{workload['kind'].lower()}-{position}"
        key = (workload["kind"], workload["namespace"], workload["name"])
        if key in seen:
            problems.append(f"workloads[{position}].name: {workload['name']!r} is already used by "
                            f"workloads[{seen[key]}]; give each {workload['kind']} in a namespace its own name")
        seen.setdefault(key, position)
    if problems:
        raise SpecError(problems)


def one_class_per_driver(groups: list[dict]) -> None:
    """Refuse two node groups whose devices of one driver would serve different extended resources."""
    seen: dict[str, tuple[int, str | None]] = {}
    problems = []
    for position, group in enumerate(groups):
        devices = group["devices"]
        if devices is None:
            continue
        first = seen.setdefault(devices["driver"], (position, devices["extendedResourceName"]))
        if first[1] != devices["extendedResourceName"]:
            problems.append(f"nodes[{position}].devices.extendedResourceName: {devices['extendedResourceName']!r} "
                            f"differs from {first[1]!r} of nodes[{first[0]}], whose devices have the same driver; "
                            f"give both the same name")
    if problems:
        raise SpecError(problems)


def load_file(path: str) -> dict:
    with open(path, encoding="utf-8") as stream:
        return load(stream.read())


# --- from spec to manifests ----------------------------------------------------------------
@dataclass(frozen=True)
class Submission:
    at: float  # seconds after the start of the run
    resource: str
    manifest: dict


def named_nodes(spec: dict) -> list[tuple[dict, str]]:
    """Every node's group and name, `{namePrefix}-{n}` with n counting on across groups of one prefix."""
    nodes, numbers = [], {}
    for group in spec["nodes"]:
        for _ in range(group["count"]):
            number = numbers.get(group["namePrefix"], 0)
            numbers[group["namePrefix"]] = number + 1
            nodes.append((group, f"{group['namePrefix']}-{number}"))
    return nodes


def node_manifests(spec: dict) -> list[dict]:
    """Ready nodes, labelled with their group's topology domains."""
    domains = topology_labels(spec)
    return [node_manifest(group, name, domains.get(name)) for group, name in named_nodes(spec)]


def topology_labels(spec: dict) -> dict[str, dict[str, str]]:
    """Node name → the labels its group's `topology` gives it (module docstring)."""
    labels: dict[str, dict[str, str]] = {}
    generated: dict[str, int] = {}  # domains generated so far, per label
    named = named_nodes(spec)
    start = 0
    for group in spec["nodes"]:
        bases = []  # the number of each level's first domain in this group
        for level in group["topology"]:
            bases.append(generated.get(level["label"], 0))
            if level["values"] is None:
                generated[level["label"]] = bases[-1] + group["count"] // level["nodes"]
        for n, (_, name) in enumerate(named[start:start + group["count"]]):
            if group["topology"]:
                labels[name] = {level["label"]: level["values"][n // level["nodes"]] if level["values"] is not None
                                else f"{level['prefix'] or level['label'].rsplit('/', 1)[-1]}-{base + n // level['nodes']}"
                                for level, base in zip(group["topology"], bases)}
        start += group["count"]
    return labels


def device_manifests(spec: dict) -> list[tuple[str, dict]]:
    """(resource, manifest): a DeviceClass per driver, selecting its devices, then a ResourceSlice
    per node of every group with devices, one pool per node."""
    classes: dict[str, dict] = {}
    slices = []
    for group, name in named_nodes(spec):
        devices = group["devices"]
        if devices is None:
            continue
        driver = devices["driver"]
        class_spec = {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]}
        if devices["extendedResourceName"]:
            class_spec["extendedResourceName"] = devices["extendedResourceName"]
        classes.setdefault(driver, {"apiVersion": RESOURCE_API_VERSION, "kind": "DeviceClass",
                                    "metadata": {"name": driver}, "spec": class_spec})
        attributes = {key: {"string": value} for key, value in devices["attributes"].items()}
        slices.append({"apiVersion": RESOURCE_API_VERSION, "kind": "ResourceSlice",
                       "metadata": {"name": f"{name}-{driver}"},
                       "spec": {"driver": driver, "nodeName": name,
                                "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                                "devices": [{"name": f"device-{i}", **({"attributes": attributes} if attributes else {})}
                                            for i in range(devices["count"])]}})
    return [(DEVICE_CLASSES, c) for c in classes.values()] + [(RESOURCE_SLICES, s) for s in slices]


def node_groups(spec: dict) -> list[NodeGroup]:
    """The spec's autoscaled node groups, their template a node of their shape."""
    return [NodeGroup(group["name"], node_template(group), group["min"], group["max"], group["provisioningSeconds"])
            for group in spec["nodeGroups"]]


def priority_class_manifests(spec: dict) -> list[dict]:
    """The spec's PriorityClasses, to create before the workloads that name them."""
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": c["name"]},
             "value": c["value"], "preemptionPolicy": c["preemptionPolicy"], "globalDefault": c["globalDefault"]}
            for c in spec["priorityClasses"]]


def node_manifest(group: dict, name: str, domains: dict[str, str] | None = None) -> dict:
    node = node_template(group)
    node["metadata"] = {"name": name, "labels": {**group["labels"], **(domains or {}), HOSTNAME_LABEL: name}}
    return node


def node_template(group: dict) -> dict:
    """A Ready node of the group's shape, without a name: labels, capacity and allocatable, taints."""
    capacity = {"cpu": group["cpu"], "memory": group["memory"], "pods": str(group["pods"])}
    if group["gpusPerNode"]:
        capacity[group["gpuResource"]] = str(group["gpusPerNode"])
    taints = [{k: v for k, v in taint.items() if v or k != "value"} for taint in group["taints"]]
    spec = {"taints": taints} if taints else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"labels": dict(group["labels"])}, "spec": spec,
            "status": {"capacity": capacity, "allocatable": dict(capacity),
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "kubelet is posting ready status"}]}}


def submissions(spec: dict) -> list[Submission]:
    """Every workload's manifest with its submit time, in submit order (file order on ties)."""
    built = []
    for workload in spec["workloads"]:
        builder = BUILDERS[workload["kind"]]
        built += [Submission(workload["submitSeconds"], resource, manifest)
                  for resource, manifest in builder(workload)]
    return sorted(built, key=lambda submission: submission.at)


def pod_template(workload: dict, container: str, restart_policy: str) -> dict:
    resources = {"cpu": workload["cpuPerPod"], "memory": workload["memoryPerPod"]}
    if workload["gpusPerPod"]:
        resources[GPU] = str(workload["gpusPerPod"])
    annotations = {WORLD_SIZE_ANNOTATION: str(workload["size"])}
    topology = workload["topology"] or {}
    for annotation, key in zip(names.TOPOLOGY_ANNOTATIONS, ("required", "preferred", "sliceRequired", "sliceSize")):
        if topology.get(key) is not None:
            annotations[annotation] = str(topology[key])
    if workload["durationSeconds"] is not None:
        annotations[DURATION_ANNOTATION] = f"{workload['durationSeconds']:g}"
    spec = {"restartPolicy": restart_policy,
            "containers": [{"name": container, "image": IMAGE,
                            "resources": {"requests": resources, "limits": dict(resources)}}]}
    if workload["priorityClassName"] is not None:
        spec["priorityClassName"] = workload["priorityClassName"]
    return {"metadata": {"annotations": annotations}, "spec": spec}


def workload_metadata(workload: dict) -> dict:
    return {"name": workload["name"], "namespace": workload["namespace"]}


def pytorchjob(workload: dict) -> list[tuple[str, dict]]:
    """One master and `size - 1` workers."""
    template = pod_template(workload, PYTORCH_CONTAINER, "OnFailure")
    replicas = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template}}
    if workload["size"] > 1:
        replicas["Worker"] = {"replicas": workload["size"] - 1, "restartPolicy": "OnFailure", "template": template}
    return [(PYTORCHJOBS, {"apiVersion": PYTORCHJOB_API_VERSION, "kind": "PyTorchJob",
                           "metadata": workload_metadata(workload), "spec": {"pytorchReplicaSpecs": replicas}})]


def indexed_job_spec(workload: dict, pods: int) -> dict:
    return {"parallelism": pods, "completions": pods, "completionMode": "Indexed", "backoffLimit": 0,
            "template": pod_template(workload, "trainer", "Never")}


def jobset(workload: dict) -> list[tuple[str, dict]]:
    """One replicated job `workers` of `size / podsPerJob` Jobs."""
    replicated = {"name": "workers", "replicas": workload["size"] // workload["podsPerJob"],
                  "template": {"spec": indexed_job_spec(workload, workload["podsPerJob"])}}
    return [(JOBSETS, {"apiVersion": JOBSET_API_VERSION, "kind": "JobSet", "metadata": workload_metadata(workload),
                       "spec": {"replicatedJobs": [replicated]}})]


def job(workload: dict) -> list[tuple[str, dict]]:
    return [(JOBS, {"apiVersion": JOB_API_VERSION, "kind": "Job", "metadata": workload_metadata(workload),
                    "spec": indexed_job_spec(workload, workload["size"])})]


def pods(workload: dict) -> list[tuple[str, dict]]:
    """One pod, or `size` pods declared as one explicit group (`gangkeeper.io/group`)."""
    template = pod_template(workload, "trainer", "Never")
    if workload["size"] == 1:
        return [(PODS, {"apiVersion": "v1", "kind": "Pod",
                        "metadata": {**workload_metadata(workload), **template["metadata"]},
                        "spec": template["spec"]})]
    annotations = {**template["metadata"]["annotations"], MIN_COUNT_ANNOTATION: str(workload["size"])}
    return [(PODS, {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"{workload['name']}-{index}", "namespace": workload["namespace"],
                                 "labels": {GROUP_LABEL: workload["name"]}, "annotations": annotations},
                    "spec": template["spec"]})
            for index in range(workload["size"])]


BUILDERS = {"PyTorchJob": pytorchjob, "JobSet": jobset, "Job": job, "Pod": pods}
