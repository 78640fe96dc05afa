"""How the pass decides, as the controller's flags set it: timeouts, backoff, the queue's policy,
preemption, what a rollback does with members no owner recreates, how capacity is asked of an
autoscaler and how many members a pass tells, with an Event on each, why they wait."""

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from gangkeeper import names
from gangkeeper.controller.planning.queue import QueuePolicy


class Preempting(enum.StrEnum):
    """Whether a group that does not fit may take the place of lower-priority work (`--preemption`)."""

    LOWER_PRIORITY = "LowerPriority"  # Kubernetes' own default for pods
    NEVER = "Never"


class Ownerless(enum.StrEnum):
    """What a rollback does with members no owner would recreate (`--rollback-ownerless`)."""

    DELETE = "delete"  # every one, bound or not: none can be gated again, the bound ones hold accelerators
    KEEP = "keep"      # none: the bound ones keep what they hold until someone deletes them


class CapacityProvisioning(enum.StrEnum):
    """How a group that waits for capacity new nodes could supply asks an autoscaler for them
    (`--capacity-provisioning`; docs/design.md, "Autoscaled clusters")."""

    NONE = "None"  # it waits for capacity to come free
    PROVISIONING_REQUEST = "ProvisioningRequest"  # one atomic ProvisioningRequest (cluster-autoscaler)
    PLACEHOLDERS = "Placeholders"  # pending pause pods in its shape, which any autoscaler serves (Karpenter)


@dataclass(frozen=True)
class Provisioning:
    """Asking an autoscaler for a waiting group's nodes: how (`mode`), the ProvisioningRequest's
    class, how long placeholders may wait to be bound before they are taken back, the backoff
    between asks, and the most the autoscaler may add of each resource (a group asking more is
    reported once and never asked for: `--provisioning-limit`)."""

    mode: CapacityProvisioning = CapacityProvisioning.NONE
    provisioning_class: str = names.BEST_EFFORT_ATOMIC_SCALE_UP
    placeholder_seconds: float = 900.0
    backoff_seconds: float = 60.0
    backoff_cap_seconds: float = 960.0
    limits: Mapping[str, Fraction] = field(default_factory=dict)

    def backoff(self, attempt: int) -> float:
        """How long after the `attempt`-th ask ended the next one is made."""
        return min(self.backoff_seconds * 2 ** min(max(attempt - 1, 0), 32), self.backoff_cap_seconds)


@dataclass(frozen=True)
class Settings:
    bind_timeout_seconds: float = 120.0
    policy: QueuePolicy = QueuePolicy()
    rollback_backoff_seconds: float = 30.0
    rollback_backoff_cap_seconds: float = 960.0
    accelerator_patterns: tuple[str, ...] = names.DEFAULT_ACCELERATORS
    fail_on_schedule_timeout: bool = False
    rollback_ownerless: Ownerless = Ownerless.DELETE
    preemption: Preempting = Preempting.LOWER_PRIORITY
    # A gated group short of members that gains none for this long is reported (`controller.deciding.incomplete`).
    incomplete_group_seconds: float = 300.0
    provisioning: Provisioning = Provisioning()
    # Events a pass writes on members at most, telling them why they wait or that they were
    # released (`controller.deciding.telling`); 0 tells none.
    pod_events_per_pass: int = 1_000
