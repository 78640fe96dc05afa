"""Devices as the kube-scheduler allocates them (DRA, `resource.k8s.io/v1`), so that a plan holds.

A pod that names ResourceClaims binds only where the scheduler's DynamicResources filter can
allocate every claim it still needs, with the structured allocator
(`k8s.io/dynamic-resource-allocation/structured`). This package predicts that allocator for the
planner, on plain data:

  - `demand`: what a pod asks for, one claim per `spec.resourceClaims` entry (a per-pod claim
    from its template or the claim generated from it, or a shared ResourceClaim); a claim already
    allocated is demanded as that allocation (the pod holds those devices);
  - `published`, on `devices`: what the cluster offers, the DeviceClasses and the devices the
    drivers' ResourceSlices publish, as each node sees them in allocator order;
  - `matching`, on `cel`: which devices a request may take (CEL selectors, with the Kubernetes
    libraries as Kubernetes answers them and `quantities` as it holds them; tolerations);
  - `allocator`: the search for one pod on one node, and pods one after the other in every
    order that matters;
  - `inventory`: the claims and the devices reserved members hold, changed one watch event at a
    time and copied cheaply for a pass, and the questions the planner asks (`rooms`: its index
    per demand).

A device matches a request when every selector of its DeviceClass and then of the request
evaluates true. An expression that fails to compile or evaluate on a free device makes the
allocation on that node fail with the error as the reason: the real allocator stops there too
(it returns the error as soon as it reaches that device; the model, without knowing the exact
path, refuses the node).

Modelled besides: ExactCount and All, `firstAvailable` subrequests, `matchAttribute`
constraints, `adminAccess` (does not take the device), device taints with NoSchedule/NoExecute
and request tolerations, pools over several slices (only the newest `pool.generation` counts;
an incomplete pool is skipped, and fails an All request), slices for one node (`nodeName`),
all nodes, a node selector, or per device (`perDeviceNodeSelection`), each device available
only to the nodes it reaches; shared claims (already allocated: only the nodes its
`allocation.nodeSelector` admits, no new devices; not yet: the first member to hold it allocates
it, and the others must land on nodes the allocated devices all reach, as the allocator writes
the allocation's node selector, and, from another node, only where the devices the claim may
take all reach the same nodes on both nodes and, bound first, its allocation would admit the
same nodes: `allocator`); at most 32 devices per claim and 256 consumers of a claim
(`resourceclaim in use`).

Not modelled: partitionable devices (a device that consumes counters is never chosen: it
might over-commit the counters otherwise), consumable capacity (every device is exclusive),
binding conditions (such devices are never chosen), DeviceTaintRules, the extended-resource
claim's request names (one request per resource, named after it), prioritising among several
DeviceClasses' slices on shared (network-attached) pools beyond the allocator order, a device
whose own node selector has several terms (the real allocator fails on writing the allocation's
node selector; no device of its pool is taken), a pool's older generation a node still sees
while the newest reaches other nodes only (the newest counts).
"""
