"""Selectors and tolerations as the API writes them, read into `model` values: a NodeSelector's
terms (a pod's required node affinity, a PersistentVolume's node affinity, a DRA allocation's or
slice's node selector), a LabelSelector, a toleration."""

from collections.abc import Mapping, Sequence

from gangkeeper.controller.model.nodes import Toleration
from gangkeeper.controller.model.selectors import NOTHING, LabelSelector, Requirement, Term, canonical


def selector_terms(selector: Mapping | None) -> tuple[Term, ...] | None:
    """The terms of a core/v1 NodeSelector, None for no selector."""
    if selector is None:
        return None
    return tuple(
        Term(requirements(term.get("matchExpressions")), requirements(term.get("matchFields")))
        for term in selector.get("nodeSelectorTerms") or ()
    )


def required_terms(volume_node_affinity: Mapping | None) -> tuple[Term, ...] | None:
    """A PersistentVolume's `spec.nodeAffinity.required`, None when it has none."""
    return selector_terms((volume_node_affinity or {}).get("required"))


def requirements(raw: Sequence[Mapping] | None) -> tuple[Requirement, ...]:
    return tuple(Requirement(r.get("key", ""), r.get("operator", ""), tuple(r.get("values") or ()))
                 for r in raw or ())


def selector_from_api(raw: Mapping | None) -> LabelSelector:
    """A metav1.LabelSelector; None (no selector) is `NOTHING`."""
    if raw is None:
        return NOTHING
    found = [Requirement(key, "In", (value,)) for key, value in (raw.get("matchLabels") or {}).items()]
    found += requirements(raw.get("matchExpressions"))
    return LabelSelector(canonical(found))


def toleration(raw: Mapping) -> Toleration:
    return Toleration(raw.get("key", ""), raw.get("operator", ""), raw.get("value", ""), raw.get("effect", ""))
