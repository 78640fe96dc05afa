"""How gangkeeper's messages name a list of things: the first few, and how many more."""

from collections.abc import Sequence


def first_of(items: Sequence[str], at_most: int) -> str:
    """`a, b, c and 4 more`: the first `at_most` of `items`, in the order given, and how many follow."""
    shown = ", ".join(items[:at_most])
    return shown + (f" and {len(items) - at_most} more" if len(items) > at_most else "")
