"""Reading partitioned ``m3`` boxes: which members to ask, and their answers merged into one.

For a partitioned box (docs/cumulus.md §5) the Head's answer carries
the box's *layout* (members, segments of hash slots, each map's partition
column) instead of a node.  A read whose keys bind the map's partition
column goes to the one member owning that key (:func:`members_to_ask`); a
read of a home map (no partition column) to the home member; any other read
to every member holding a segment, concurrently, each asked for the layout
version the client knows (``layout=L``).  The members' pre-aggregated parts
are merged (:func:`merge`, in :mod:`boreas.client.partitioned_merge`):
slices concatenated, sums added, min/max over the parts that found
something; the answers must cover the segments read exactly once.  A
member at a newer layout answers 409 with it (members learn a relayout
before the Head) and the read is retried under it; a member that
does not have the box any more, or cannot be reached, makes the client ask
the Head again; both for up to ``moved_wait`` seconds.  The reads are
eventual (§4.1): members may be at different positions, so a merged answer
is not a snapshot; its ``version`` is the sum of the members' versions
(batches applied, a progress count).  ``stable=True`` is READ_STABLE (§4.2):
the client asks the leader (member 0) for the stable epoch ``S``, then every
member for its maps at the end of ``S``, a consistent cut of the whole box;
the result's ``epoch`` is ``S``, ``age`` how many seconds ago it ended, and
``positions`` the last input batch of each producer it includes.  A member
that dropped ``S`` meanwhile (410) makes the client start again with the
new one.  ``members`` says which members answered and ``segments`` the
segments their answers covered.

:class:`~boreas.client.query.QueryClient` reads a partitioned box through
:class:`PartitionedReads`, which keeps what the client knows of each such
box (its newest layout, its maps); the rest are pure functions.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import urlencode

from boreas.m3.cumulus import EVERYWHERE, Layout, LayoutError, home_slot, slot
from boreas.wire.addressing import endpoint_url
from boreas.wire.client import PeerClient, PeerError, PeerRefused, PeerUnreachable

from .errors import QueryFailed
from .partitioned_merge import combine, cover_problem, merge  # noqa: F401 - re-exported (client.query imports them from here)

# -- where to read (merging the members' parts: .partitioned_merge) ---------------------


def partition_target(described: dict[str, Any], name: str | None) -> tuple[str, tuple[tuple[str, str], ...]] | None:
    """The map whose partition column places a read of ``name``, and ``name``'s key columns.

    ``described`` is a member's ``GET /query/{box}/maps`` answer.  A map
    stands for itself; a view (or an out stream, or no name: the default
    out stream) for its first map, whose keys are the view's keys.  None
    when ``name`` is none of these (the members will say why).

    >>> d = {"default": "G", "streams": {"G": "Q1"}, "maps": {"Q1_total": {"keys": [["a", "INT"]]}},
    ...      "views": {"Q1": {"keys": [["a", "INT"]], "maps": ["Q1_total", "Q1_n"]}}}
    >>> partition_target(d, None), partition_target(d, "Q1_total")[0], partition_target(d, "nope")
    (('Q1_total', (('a', 'INT'),)), 'Q1_total', None)
    """
    streams, views, maps = described.get("streams", {}), described.get("views", {}), described.get("maps", {})
    name = name or described.get("default")
    if name is None:
        return None
    if name in maps:
        return name, tuple((n, t) for n, t in maps[name].get("keys", []))
    view = views.get(streams.get(name, name))
    if view is None or not view.get("maps"):
        return None
    return view["maps"][0], tuple((n, t) for n, t in view.get("keys", []))


def typed_keys(keys: Sequence[Any], columns: Sequence[tuple[str, str]]) -> tuple:
    """Keys as the values a member stores (to hash them as it does); None for a wildcard or a bad key.

    >>> typed_keys(["7", "_", "1995-03-01", 2.5], [("a", "INT"), ("b", "INT"), ("d", "DATE"), ("f", "FLOAT")])
    (7, None, datetime.date(1995, 3, 1), 2.5)
    >>> typed_keys(["x"], [("a", "INT")]), typed_keys([3], [("s", "STRING")])
    ((None,), ('3',))
    """
    return tuple(_typed(k, kind) for k, (_, kind) in zip(keys, columns))


def _typed(value: Any, kind: str) -> Any:
    if value is None or value == "_" or isinstance(value, bool):
        return None
    try:
        if kind == "INT":
            return value if isinstance(value, int) else int(value)
        if kind == "FLOAT":
            return float(value)
        if kind == "DATE":
            if isinstance(value, dt.date):
                return value
            text = str(value)
            if text.lstrip("-").isdigit():  # a timestamp (microseconds), as the node reads one
                return dt.date.fromordinal(_EPOCH + int(text) // _DAY_US)
            return dt.date.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return str(value)


_EPOCH = dt.date(1970, 1, 1).toordinal()
_DAY_US = 86_400_000_000


def members_to_ask(layout: Layout, map_column: int | None, keys: Sequence[Any]) -> tuple[int, ...]:
    """The members a read of a map must ask: the owner of a bound partition key, else every one with a segment.

    ``map_column`` is the map's partition column (``layout.column(map)``),
    None for a home map (kept whole on the home member), ``"*"`` for a
    replicated map (every member holds all of it: the home member is asked);
    ``keys`` are the read's typed keys, None for a wildcard.

    >>> from boreas.m3.cumulus import even_layout
    >>> lay = even_layout("g", ["n1:1", "n2:1", "n3:1"], 6, maps=[("Q1_total", 0), ("Q2_s", None)])
    >>> members_to_ask(lay, 0, [7]), members_to_ask(lay, 0, []), members_to_ask(lay, 0, [None])
    ((1,), (0, 1, 2), (0, 1, 2))
    >>> members_to_ask(lay, None, []) == members_to_ask(lay, "*", [7]) == (lay.home,)
    True
    """
    if map_column is None or map_column == EVERYWHERE:
        return (layout.home,)
    key = keys[map_column] if map_column < len(keys) else None
    if key is not None:
        try:
            return (layout.owner_of_slot(slot(key)),)
        except TypeError:  # not a key value: every member (each will refuse it)
            pass
    return tuple(sorted({s.member for s in layout.segments}))


def member_url(layout: Layout, member: int, box: str, query: str) -> str:
    """Where member ``member``'s part of a read is asked: its node's ``/query/{box}``, or that member's own path
    when its node hosts several members of the box (a guest taken over in a failover, docs/cumulus.md §6.3:
    the node's ``/query/{box}`` answers for its own member only).

    >>> from boreas.m3.cumulus import even_layout
    >>> lay = even_layout("g", ["n1:1", "n2:1", "n1:1"], 6, maps=[("Q1_total", 0)])
    >>> member_url(lay, 1, "g", "agg=sum")
    'http://n2:1/query/g?agg=sum'
    >>> member_url(lay, 2, "g", "agg=sum")
    'http://n1:1/segments/g/members/2/query?agg=sum'
    """
    endpoint = layout.members[member]
    if layout.members.count(endpoint) > 1:
        return endpoint_url(endpoint, f"/segments/{box}/members/{member}/query?{query}")
    return endpoint_url(endpoint, f"/query/{box}?{query}")


def segments_needed(layout: Layout, map_column: int | None, keys: Sequence[Any]) -> frozenset[int] | None:
    """The segments a read must cover: the key's (or the home) segment, or None for every segment.

    >>> from boreas.m3.cumulus import even_layout
    >>> lay = even_layout("g", ["n1:1", "n2:1"], 4, maps=[("Q1_total", 0)])
    >>> segments_needed(lay, 0, [7]), segments_needed(lay, 0, [None]), segments_needed(lay, None, [])
    (frozenset({1}), None, frozenset({0}))
    """
    if map_column is None or map_column == EVERYWHERE:  # (a replicated map is read at the home member)
        return frozenset({layout.segment_of_slot(home_slot(layout.box)).id})
    key = keys[map_column] if map_column < len(keys) else None
    if key is not None:
        try:
            return frozenset({layout.segment_of_slot(slot(key)).id})
        except TypeError:
            pass
    return None


def _plan(layout: Layout, map: str | None, keys: Sequence[Any],
          described: dict[str, Any] | None) -> tuple[int | None, frozenset[int] | None, tuple[int, ...]]:
    """``(partition column, segments needed, members to ask)`` of a read (every member when unsure)."""
    target = partition_target(described, map) if described is not None else None
    every = tuple(sorted({s.member for s in layout.segments}))
    if target is None:
        return None, None, every
    name, columns = target
    try:
        column = layout.column(name)
    except LayoutError:
        return None, None, every
    typed = typed_keys(keys, columns)
    return column, segments_needed(layout, column, typed), members_to_ask(layout, column, typed)


def layout_of_answer(box: str, data: Any) -> Layout:
    """A layout from the Head's ``partition`` or a member's 409 ``layout``; QueryFailed if it is not one."""
    try:
        return Layout.from_dict(data)
    except (LayoutError, TypeError, ValueError) as exc:
        raise QueryFailed(f"box {box!r}: the layout given is not one ({exc})", 502) from None


# -- asking the members -----------------------------------------------------------------------


class PartitionedReads:
    """A client's reads of partitioned boxes, and what it knows of each such box.

    It is the one keeper of each box's newest layout known (the Head's, or a
    newer one a member answered) and of the box's maps (asked once from its
    home member, until the Head answers for the box again).  ``layout_of``
    is the client's :meth:`~boreas.client.query.QueryClient.layout_of`: the
    Head's answer, which the client hands back through :meth:`head_answered`.
    """

    def __init__(self, peers: PeerClient, layout_of: Callable[[str, bool], Awaitable[Layout | None]]):
        self.peers = peers
        self._layout_of = layout_of
        self._layouts: dict[str, Layout] = {}  # the newest layout known, per partitioned box
        self._described: dict[str, dict[str, Any]] = {}  # GET /query/{box}/maps, per partitioned box

    def head_answered(self, box: str, partition: Any) -> None:
        """The Head answered for ``box``: its ``partition`` (a layout; none if not partitioned), its maps unknown."""
        self._described.pop(box, None)
        if partition:
            self._layouts[box] = layout_of_answer(box, partition)
        else:
            self._layouts.pop(box, None)

    def layout(self, box: str) -> Layout | None:
        """The newest layout known of ``box``; None if it is not known to be partitioned."""
        return self._layouts.get(box)

    async def read(self, box: str, map: str | None, keys: Sequence[Any], agg: str, stable: bool,
                   params: list[tuple[str, str]], moved_wait: float) -> dict[str, Any] | None:
        """The members' answers to one read, merged (a member's answer's shape); None if not partitioned any more.

        ``params`` are the read's query parameters; the members are asked
        under the layout known (or at the stable epoch), retrying for up to
        ``moved_wait`` seconds while the layout changes or members move.
        """
        deadline = time.monotonic() + moved_wait
        while True:
            layout = self._layouts.get(box) or await self._layout_of(box, False)
            if layout is None:  # not partitioned any more
                return None
            extra = [("layout", str(layout.version))]
            info: dict[str, Any] = {}
            if stable:
                try:
                    info = await self.peers.call("GET", endpoint_url(layout.members[0], f"/segments/{box}/stable"))
                except PeerError as exc:
                    await self._after_failures(box, layout, [exc], time.monotonic() > deadline)
                    await asyncio.sleep(0.05)
                    continue
                if info["epoch"] < 0:  # the first epoch is not stable yet
                    if time.monotonic() > deadline:
                        raise QueryFailed(f"box {box!r} has no stable epoch yet", 503)
                    await asyncio.sleep(0.05)
                    continue
                layout = layout_of_answer(box, info["layout_at"])  # the layout the stable epoch ran under
                extra = [("epoch", str(info["epoch"]))]
            column, needed, asked = _plan(layout, map, keys, await self._describe_once(box, layout))
            query = urlencode([*params, *extra])
            answers = await asyncio.gather(*(self.peers.call("GET", member_url(layout, m, box, query))
                                              for m in asked), return_exceptions=True)
            failed = [a for a in answers if isinstance(a, BaseException)]
            if not failed:
                merged = merge(agg, answers, layout, needed)
                if stable:
                    merged.update(version=info["epoch"], stable=True, epoch=info["epoch"], age=info["age"],
                                  positions=info["positions"])
                return merged
            if stable and any(isinstance(e, PeerRefused) and e.status == 410 for e in failed):
                if time.monotonic() > deadline:
                    raise QueryFailed(f"box {box!r}: the stable epoch kept moving on before every member answered", 410)
                continue  # the epoch was dropped meanwhile: read the new stable one
            newer = await self._after_failures(box, layout, failed, time.monotonic() > deadline)
            if newer is not None:
                self._layouts[box] = newer
            await asyncio.sleep(0.05)

    async def _describe_once(self, box: str, layout: Layout) -> dict[str, Any] | None:
        """The box's maps, kept (from its home member, asked once); None if it cannot tell now."""
        if box not in self._described:
            try:
                self._described[box] = await self.peers.call(
                    "GET", endpoint_url(layout.members[layout.home], f"/query/{box}/maps"))
            except PeerError:
                return None
        return self._described[box]

    async def _after_failures(self, box: str, layout: Layout, failed: list[BaseException],
                              give_up: bool) -> Layout | None:
        """Raise what cannot be retried (or anything, past the deadline); else a newer layout to retry with,
        or None after refreshing the Head's."""
        newest: Layout | None = None
        for exc in failed:
            if isinstance(exc, PeerRefused):
                message = exc.payload.get("error") or str(exc)
                theirs = exc.payload.get("layout") if exc.status == 409 else None
                if isinstance(theirs, dict):
                    member_layout = layout_of_answer(box, theirs)
                    if member_layout.version > max(layout.version, newest.version if newest else 0):
                        newest = member_layout
                elif not (exc.status == 404 and message.startswith("no box ")):
                    raise QueryFailed(message, exc.status) from None
            elif not isinstance(exc, PeerUnreachable):
                raise exc
        if give_up:
            exc = failed[0]
            if isinstance(exc, PeerRefused):
                raise QueryFailed(exc.payload.get("error") or str(exc), exc.status) from None
            raise exc
        if newest is None:
            await self._layout_of(box, True)  # the Head's answer, fresh
        return newest

