"""A target's staging: the moving entries it received, apart from its store until the flip (docs/cumulus.md §6.2).

A layout change's Chunks (:func:`~.precopy.chunk_entries`: Arrow columns per
map) arrive at the target any time before the flip; what they hold is kept
here so nothing reads or drops it before the new layout's first epoch, a
later chunk's value overwriting a staged one (0 deletes: a dirty key gone
at the source), and :meth:`Staging.merge` puts it into the runtime then, as
changes of that epoch.

On the Python backend (and for items the C maps cannot take as they are:
node/cumulus/entry_install.py) an item is decoded to Python values and
staged as ``{stored key: value}``.  On a member on the native backend an
item is made codes in C without a Python object per entry (``rt_import``
without installing: m3/runtime/native/install.py) and kept as those codes
(:class:`~boreas.m3.runtime.native.install.Coded`), in the order received;
at the merge the last value of each key wins, zeros are left out, and
``NativeMemberRuntime.put_in_codes`` sets them in C in one call.  A map
staged in both forms (an item only Python takes, beside coded ones) has its
codes decoded into the Python form, in order, so the result is the same
either way.  The staging's *state* is the Python form's
(:class:`~.precopy.KeyCodec` lists), whichever form holds the entries.
"""

from __future__ import annotations

import numpy as np
from boreas.m3.cumulus.member import MemberRuntime
from boreas.m3.runtime.native.install import Coded, entries_of, import_columns

from . import entry_columns
from .entry_install import entry_columns_of
from .precopy import Codecs


def last_wins(parts: list[Coded]) -> Coded:
    """The entries of ``parts`` (one map's, in the order received) with each key once, at its last value, and
    those of value 0 left out: what a dict staging the same entries in order holds."""
    name = parts[0].name
    table = np.concatenate([p.table for p in parts]) if len(parts) > 1 else parts[0].table
    bits = np.concatenate([p.bits for p in parts]) if len(parts) > 1 else parts[0].bits
    if table.shape[1]:
        rows = np.ascontiguousarray(table[::-1]).view(np.dtype((np.void, 8 * table.shape[1]))).ravel()
        _, first = np.unique(rows, return_index=True)
        keep = np.sort(len(bits) - 1 - first)
    else:
        keep = np.arange(len(bits))[-1:]
    keep = keep[bits[keep] != 0]
    return Coded(name, np.ascontiguousarray(table[keep]), np.ascontiguousarray(bits[keep]))


class Staging:
    """What a target received of one layout change's moving entries, apart from its store until the flip."""

    def __init__(self) -> None:
        self.maps: dict[str, dict] = {}  # map -> {stored key: value}
        self.coded: dict[str, list[Coded]] = {}  # map -> its entries as codes of ``native``'s maps, in order
        self.native = None  # the C maps the codes are of (a native member's)

    def add_chunk(self, items: list, codecs: Codecs | None = None, runtime: MemberRuntime | None = None) -> None:
        """A Chunk's entries (:func:`~.precopy.chunk_entries`), decoded in bulk (on ``runtime``'s C maps, when it
        runs native, made codes there).  An item ``[map, keys, values]`` (keys in ``codecs``' form) is a Chunk
        kept early in a state saved before Arrow Chunks: staged as that form was."""
        old = [item for item in items if len(item) == 3]
        if old:
            if codecs is None:
                raise ValueError("a Chunk in the list form needs the key codecs")
            self.add(old, codecs)
        native = runtime.native_maps() if runtime is not None and runtime.keeps_native else None
        if native is not None and self.native not in (None, native):  # (codes of maps the member left)
            self._decode_all()
        for item in items:
            if len(item) == 3:
                continue
            got = None if native is None or item[0] in self.maps else entry_columns_of(native, item)
            if got is None:
                self._decode(item[0])
                self.add([entry_columns.decode_stored(item)])
                continue
            self.native = native
            self.coded.setdefault(got.name, []).append(
                import_columns(native, got.name, got.columns, got.values, ints_as_float=got.ints_as_float,
                               install=False))

    def _decode(self, name: str) -> None:
        """Map ``name``'s coded entries into the Python form (in the order received)."""
        for part in self.coded.pop(name, []):
            keys, values = self._stored(part)
            self.add([[name, keys, values]])

    def _stored(self, part: Coded) -> tuple[list, list]:
        """The keys (in the store's form: one value, or a tuple) and values of coded entries."""
        entries = entries_of(self.native, part)
        single = part.table.shape[1] == 1
        return [k[0] if single else k for k, _ in entries], [v for _, v in entries]

    def _decode_all(self) -> None:
        for name in list(self.coded):
            self._decode(name)

    def add(self, payload: list, codecs: Codecs | None = None) -> None:
        """Entries ``[[map, keys, values], ...]`` (keys in the store's form, or in ``codecs``' form from a state); a
        0 value deletes (a dirty key gone at the source)."""
        for name, keys, values in payload:
            if codecs is not None:
                keys = codecs.keys[name].decode(keys)
            self._decode(name)
            staged = self.maps.setdefault(name, {})
            staged.update(zip(keys, values))
            if 0 in values:  # only the last chunks (dirty keys) have any: one C-speed scan of the others
                for k, v in zip(keys, values):
                    if not v:
                        del staged[k]

    def merge(self, runtime: MemberRuntime, epoch: int) -> None:
        """Put every staged entry into the store, as changes of ``epoch``; the staging is empty afterwards (codes
        set in C by ``put_in_codes`` while the runtime still runs on the maps they are of)."""
        if self.coded and (not runtime.keeps_native or runtime.native_maps() is not self.native):
            self._decode_all()
        for name, parts in self.coded.items():
            runtime.put_in_codes(name, last_wins(parts), epoch)
        for name, entries in self.maps.items():
            runtime.put_in(name, entries, epoch)
        self.maps, self.coded = {}, {}

    def state(self, codecs: Codecs) -> list:
        out = [[name, codecs.keys[name].encode(list(entries)), list(entries.values())]
               for name, entries in self.maps.items()]
        for name, parts in self.coded.items():
            keys, values = self._stored(last_wins(parts))
            out.append([name, codecs.keys[name].encode(keys), values])
        return out

    @classmethod
    def of(cls, state: list, codecs: Codecs) -> Staging:
        staging = cls()
        staging.add(state, codecs)
        return staging
