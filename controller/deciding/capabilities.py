"""What the API server can do, as far as the controller has found out: one value, passed into
each pass (`reconciler.reconcile`) and handed back by the executor with what its writes taught
it (`acting.executor.Executed`), so that nothing learned from the API is a flag set from outside
on the index or the settings.

Whether the Gang CRD (and the ProvisioningRequest CRD) is served is what its informer last found (it can come and go: a CRD
installed or deleted); whether it keeps a Gang's `status.reservations` is learned from the answer
to a reservation, once, and holds until the controller restarts (docs/operations.md, "Upgrade")."""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ApiCapabilities:
    # Without the Gang CRD, groups are reported on their pods, no Gang status is written and
    # groups are reserved on each member.
    serves_gangs: bool = True
    # A Gang CRD of an older version prunes status.reservations: groups are reserved on each member.
    keeps_gang_reservations: bool = True
    # Whether ProvisioningRequests are served, as their informer last found (`--capacity-provisioning
    # ProvisioningRequest`): without them, no group asks (`controller.deciding.provisioning`).
    serves_provisioning_requests: bool = True
