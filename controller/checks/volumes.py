"""Where a member's volumes let it run: the node affinity of the PersistentVolumes its claims are bound to.

The kube-scheduler's VolumeBinding filter refuses a node that a bound PersistentVolume's
`spec.nodeAffinity.required` does not match (`node(s) had volume node affinity conflict`), and a
pod whose claim does not exist (`persistentvolumeclaim "…" not found`). A claim not yet bound
(`WaitForFirstConsumer`) is bound by the scheduler to a volume it picks for the node: that
choice is not modelled, and such a claim restricts nothing here (docs/limits.md).

Claims and volumes come from the informers one at a time; what a member may use is looked up
at planning time, so that a claim bound after the member was created counts at once.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gangkeeper.controller.checks.eligibility import affinity_matches
from gangkeeper.controller.model.nodes import Node
from gangkeeper.controller.model.selectors import Term
from gangkeeper.controller.reading.selectors import required_terms

CONFLICT = "volume node affinity conflict"


@dataclass(frozen=True, slots=True)
class VolumeLimit:
    """What a member's volumes require of a node: node selector terms (each volume's must match),
    or why no node can take it (a claim that does not exist)."""

    terms: tuple[tuple[Term, ...], ...] = ()
    missing: str | None = None

    def allows(self, node: Node) -> bool:
        return self.missing is None and all(affinity_matches(terms, node) for terms in self.terms)

    @property
    def restricts(self) -> bool:
        return bool(self.terms) or self.missing is not None


NO_LIMIT = VolumeLimit()


class Volumes:
    """PersistentVolumeClaims (namespace/name → the volume they are bound to) and the node
    affinity of PersistentVolumes (name → terms), changed one object at a time."""

    __slots__ = ("_claims", "_volumes")

    def __init__(self) -> None:
        self._claims: dict[str, str] = {}
        self._volumes: dict[str, tuple[Term, ...]] = {}

    def put_claim(self, key: str, claim: Mapping | None) -> None:
        """A claim (`namespace/name`), or None when it is gone; an unbound claim is kept with no volume."""
        if claim is None:
            self._claims.pop(key, None)
        else:
            self._claims[key] = (claim.get("spec") or {}).get("volumeName") or ""

    def put_volume(self, name: str, volume: Mapping | None) -> None:
        terms = None if volume is None else required_terms((volume.get("spec") or {}).get("nodeAffinity"))
        if terms is None:
            self._volumes.pop(name, None)
        else:
            self._volumes[name] = terms

    def limit(self, namespace: str, claims: Iterable[str]) -> VolumeLimit:
        """What the member's claims (by name, in its namespace) require of its node."""
        terms = []
        for claim in claims:
            volume = self._claims.get(f"{namespace}/{claim}")
            if volume is None:
                return VolumeLimit(missing=f'persistentvolumeclaim "{claim}" not found')
            if volume in self._volumes:
                terms.append(self._volumes[volume])
        return VolumeLimit(tuple(terms)) if terms else NO_LIMIT
