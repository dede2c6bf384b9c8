"""A partitioned box's ``<partition>`` to XML and back: deployment XML's form and the catalog's.

Apart from :mod:`.xmlcodec` because a partition is the one declaration with
a grammar of its own (members, map placements and pins, segments,
replicated maps), and the rules a schema cannot state are checked here.
"""

from __future__ import annotations

from lxml import etree

from .diagnostics import Origin
from .model import Partition, SegmentPlacement
from .xml_attrs import DecodeError, child_origin, children, int_attr, set_attrs, sub_element


def decode_partition(el: etree._Element, origin: Origin) -> Partition:
    """``<partition>`` as deployment XML writes it (members, segments=, key=, replicate=, pins) or in catalog form.

    Member *i* is the *i*-th ``<node>``, or the one with ``member="i"``.  A
    ``<map>`` with a ``position`` is a planned map's partition column, one
    without ``key`` a planned map kept whole (home), one with only ``key`` a pin.
    """
    box = el.get("box")
    where = f"partition of box {box!r}"
    nodes = children(el, "node")
    members = [int_attr(n, "member") for n in nodes]
    if any(m is not None for m in members):
        if sorted(m if m is not None else -1 for m in members) != list(range(len(nodes))):
            raise DecodeError(f"{where}: <node member> numbers the members 0 to {len(nodes) - 1}, each once "
                              f"(or leave member out everywhere: member i is the i-th <node>)")
        nodes = [n for _, n in sorted(zip(members, nodes), key=lambda pair: pair[0])]
    pins: dict[str, str] = {}
    maps: dict[str, tuple[str, str | None, int | None]] = {}
    elements = children(el, "map")
    for i, m in enumerate(elements, start=1):
        at = child_origin(origin, m, f"/map[{i}]" if len(elements) > 1 else "/map")
        name, key, position = m.get("name"), m.get("key"), int_attr(m, "position")
        if position is None and key is not None:  # a pin, as the user wrote it
            if name in pins:
                raise DecodeError(f"{where} pins map {name!r} twice", at)
            pins[name] = key
            continue
        if position is not None and (key is None or position < 0):
            raise DecodeError(f"{where}: <map name={name!r} position={position}> needs key= (the name of "
                              f"key column {position}) and a position of 0 or more", at)
        if name in maps:
            raise DecodeError(f"{where} places map {name!r} twice", at)
        maps[name] = (name, key, position)
    segments = []
    elements = children(el, "segment")
    for i, seg in enumerate(elements, start=1):
        at = child_origin(origin, seg, f"/segment[{i}]" if len(elements) > 1 else "/segment")
        sid, slots = int_attr(seg, "id"), (seg.get("slots") or "").split()
        try:
            lo, hi = (int(x) for x in slots)
        except ValueError:
            raise DecodeError(f"segment {sid} of box {box!r}: slots={seg.get('slots')!r}: give its first slot "
                              f"and one past its last, two whole numbers (slots=\"0 512\")", at) from None
        segments.append(SegmentPlacement(sid, lo, hi, int_attr(seg, "member")))
    replicate = (el.get("replicate") or "").split()
    if len(set(replicate)) != len(replicate):
        twice = next(name for name in replicate if replicate.count(name) > 1)
        raise DecodeError(f"{where} replicates map {twice!r} twice (replicate={el.get('replicate')!r})", origin)
    clash = next((name for name in replicate if name in pins or name in maps), None)
    if clash is not None:
        raise DecodeError(f"{where} both replicates map {clash!r} and places it with a <map> element: a "
                          f"replicated map has no partition key; drop one", origin)
    layout = int_attr(el, "layout")
    listed = _coordinator_list(el, len(nodes), where, origin)
    epoch_ms = int_attr(el, "epoch-ms")
    return Partition(
        box, tuple(n.get("endpoint") for n in nodes), tuple(segments), int_attr(el, "segments"), el.get("key"),
        tuple(pins.items()), tuple(maps.values()), (1 if segments else 0) if layout is None else layout,
        100 if epoch_ms is None else epoch_ms, el.get("id") or "", origin, int_attr(el, "members"),
        int_attr(el, "coordinators"), tuple(replicate), listed)


def _coordinator_list(el: etree._Element, members: int, where: str, origin: Origin) -> tuple[int, ...] | None:
    """``coordinator-list="0 1 3"``: the member numbers that coordinate published input (docs/cumulus.md §6.5)."""
    text = el.get("coordinator-list")
    if text is None:
        return None
    try:
        listed = tuple(int(x) for x in text.split())
    except ValueError:
        listed = ()
    if not listed or len(set(listed)) != len(listed) or not all(0 <= c < members for c in listed):
        raise DecodeError(f"{where}: coordinator-list={text!r}: distinct member numbers from 0 to {members - 1} "
                          f"(at least one), separated by spaces", origin)
    return listed


def encode_partition(obj: Partition) -> etree._Element:
    """``<partition>`` in catalog form: members numbered, the planned maps, the segments and their members."""
    el = set_attrs(etree.Element("partition"), box=obj.box, layout=obj.layout or None,
              **{"epoch-ms": obj.epoch_ms}, id=obj.id or None, key=obj.key, segments=obj.count,
              members=obj.members, coordinators=obj.coordinators,
              replicate=" ".join(obj.replicate) or None,
              **{"coordinator-list": None if obj.coordinator_list is None
                 else " ".join(map(str, obj.coordinator_list))})
    for member, endpoint in enumerate(obj.nodes):
        sub_element(el, "node", endpoint=endpoint, member=member)
    for name, key in obj.pins:
        sub_element(el, "map", name=name, key=key)
    for name, key, position in obj.maps:
        sub_element(el, "map", name=name, key=key, position=position)
    for seg in obj.segments:
        sub_element(el, "segment", id=seg.id, slots=f"{seg.lo} {seg.hi}", member=seg.member)
    return el
