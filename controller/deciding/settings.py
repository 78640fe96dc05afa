"""How the pass decides, as the controller's flags set it: timeouts, backoff, the queue's policy,
preemption and what a rollback does with members no owner recreates."""

import enum
from dataclasses import dataclass

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
