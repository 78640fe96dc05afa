"""What the admission policy is configured with: the only input besides the request itself."""

from dataclasses import dataclass

from gangkeeper import names


@dataclass(frozen=True)
class Policy:
    excluded_namespaces: frozenset[str] = frozenset({names.DEFAULT_NAMESPACE})
    accelerator_patterns: tuple[str, ...] = names.DEFAULT_ACCELERATORS
    controller_username: str = names.DEFAULT_CONTROLLER_USERNAME
