"""How a map's key tuples are cut into an index's parts and joined back (:class:`Cut`), and the stored form of a
key or key part (:func:`stored`).

A map stored under an index keeps each entry as (bound part, rest part); :class:`~.maps.MapStore` turns key
tuples into that form and back for every entry it writes or lists, so the cut is built once per index from
``operator.itemgetter`` rather than run as a Python loop per key.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter


def stored(values: tuple):
    """The stored form of a key or key part: the value itself when there is one, else the tuple.

    >>> stored((4,)), stored((4, 5)), stored(())
    (4, (4, 5), ())
    """
    return values[0] if len(values) == 1 else values


@dataclass(frozen=True)
class Cut:
    """How one index of a map cuts its key tuples, with ``operator.itemgetter`` rather than a loop per key:
    ``bound``/``rest`` give a key tuple's parts in stored form, ``join`` the key tuple of a stored pair (its
    inverse).  Built once per index: :meth:`MapStore.set_stored`, :meth:`MapStore.items` and a scan in
    :meth:`MapStore.match` run them once per entry, where a Python loop over positions cost several times more.

    >>> c = Cut.of(3, (0, 2)); c.bound((1, 2, 3)), c.rest((1, 2, 3)), c.join((1, 3), 2)
    ((1, 3), 2, (1, 2, 3))
    >>> c = Cut.of(2, (0, 1)); c.bound((1, 2)), c.rest((1, 2)), c.join((1, 2), ())
    ((1, 2), (), (1, 2))
    """

    pos: tuple[int, ...]
    rest_pos: tuple[int, ...]
    bound: Callable
    rest: Callable
    join: Callable

    @staticmethod
    def of(arity: int, pos: tuple[int, ...]) -> "Cut":
        rest_pos = tuple(i for i in range(arity) if i not in pos)
        order = pos + rest_pos  # the parts concatenated: key position i is at order.index(i)
        perm = itemgetter(*(order.index(i) for i in range(arity)))
        one_b, one_r = len(pos) == 1, len(rest_pos) == 1

        def join(b, r) -> tuple:
            return perm(((b,) if one_b else b) + ((r,) if one_r else r))
        return Cut(pos, rest_pos, _getter(pos), _getter(rest_pos), join)


def _getter(positions: tuple[int, ...]) -> Callable:
    """A key tuple's part at ``positions`` (one position: the value itself; none: ``()``, which ``itemgetter``
    cannot say).

    >>> _getter((1,))((5, 6)), _getter((0, 1))((5, 6)), _getter(())((5, 6))
    (6, (5, 6), ())
    """
    return itemgetter(*positions) if positions else (lambda key: ())
