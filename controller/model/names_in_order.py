"""Node names in name order as an owner hands them out at one moment, with what moved since.

The ledger keeps the nodes with each amount of an accelerator free in name order and hands out
a tuple of them, a new one whenever they change (`Ledger.names_by_free`); the node pool works
out, from such a tuple, which of them a class may use and how many each domain has. After every
admitted plan a few nodes move between amounts: reading every name again for each group would
cost the cluster's size per group. So each tuple handed out is a `NamesInOrder`: it names the
journal its owner writes every name that came (+1) or left (−1) into, and where the journal
stood when the tuple was made. A reader holding an earlier tuple of the same journal updates
what it worked out by the moves between the two (`moves_between`) instead.

An owner starts a new journal when one holds more moves than names (`full`): tuples of the
old one are then read again in full, which costs no more than the moves did.
"""

from bisect import bisect_left
from collections.abc import Iterable, Sequence

Move = tuple[str, int]  # a node's name, and +1 when it came, −1 when it left
JOURNAL_MOVES = 64  # moves a journal always has room for, however few the names


class NamesInOrder(tuple[str, ...]):
    """Names in name order, and the journal (`journal`, from `position` on) of what moved after them."""

    journal: list[Move]
    position: int

    def __new__(cls, names: Iterable[str], journal: list[Move]) -> "NamesInOrder":
        made = super().__new__(cls, names)
        made.journal, made.position = journal, len(journal)
        return made


def moves_between(old: Sequence[str], new: Sequence[str]) -> Sequence[Move] | None:
    """What moved from `old` to `new`, in the order it moved; None when that is not known (not
    two hand-outs of one journal, the later one second)."""
    if type(old) is not NamesInOrder or type(new) is not NamesInOrder:
        return None
    if old.journal is not new.journal or old.position > new.position:
        return None
    return old.journal[old.position:new.position]


def moved(names: Sequence[str], moves: Iterable[Move]) -> list[str]:
    """`names` (in name order) after `moves`, still in name order."""
    ordered = list(names)
    move_into(ordered, moves)
    return ordered


def move_into(ordered: list[str], moves: Iterable[Move]) -> None:
    """Make the moves in `ordered` (in name order), keeping it in name order."""
    for name, sign in moves:
        at = bisect_left(ordered, name)
        if sign > 0:
            ordered.insert(at, name)
        else:
            del ordered[at]


def full(journal: Sequence[Move], names: int) -> bool:
    """Whether an owner should start a new journal: reading `names` again costs less than these moves."""
    return len(journal) > max(JOURNAL_MOVES, names)
