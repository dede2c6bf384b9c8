"""Reading a runtime's maps and views: ``view()`` and the query API of seed 001 (Figure 3).

Why apart from :mod:`.program` (batches, versions, backends, state): reads
change nothing; they take the runtime's lock, so they never see a
half-applied batch, and read the maps through ``store`` (with the native
backend, the mirror brought up to date when read).  :class:`Reads` is the
part of :class:`~.program.Runtime` that answers them; the runtime provides
``_lock``, ``program``, ``store``, ``_forms`` (the views computed when read)
and ``_version``.

>>> from .program import Runtime
>>> rt = Runtime("CREATE STREAM R(a INT, b INT); SELECT a, SUM(b) AS s FROM R GROUP BY a", backend="python")
>>> rt.apply_batch([("R", 1, (1, 10)), ("R", 1, (2, 5))])
1
>>> rt.view("Q1", 2), rt.read_sum("Q1_s"), rt.read_max("Q1_s", 1)
({(2,): 5}, 15, 10)
"""

from __future__ import annotations

import threading

from .. import query
from ..ast import Program
from ..errors import RuntimeStateError
from ..nullable import ViewNulls
from .evaluate import Reader
from .maps import MapStore
from .viewchanges import current_reader, plain_value
from .views import ViewForm, candidate_rows, row_value


class Reads:
    """``view()``, ``read_slice``/``read_sum``/``read_min``/``read_max``, ``read_stable`` and ``snapshot()``."""

    _lock: threading.RLock
    program: Program
    store: MapStore
    _forms: dict[str, ViewForm]
    _version: int
    _nulls: dict[str, ViewNulls]

    def _reader(self) -> Reader:
        """The maps as they are now, for evaluating the rows of views computed when read."""
        return current_reader(self.store)

    def view(self, name: str, *pattern) -> dict[tuple, object]:
        """The view's rows matching ``pattern`` (``None`` = any; none given = the whole view).

        Values are tuples when the view has several columns.  A row exists
        where any of the view's maps has an entry (and, for a view computed
        when read, where its condition holds: :mod:`.views`).
        """
        with self._lock:
            try:
                v = self.program.view(name)
            except KeyError:
                raise RuntimeStateError(f"no view named {name!r}") from None
            store = self.store
            form = self._forms.get(name)
            if form is not None:
                if len(pattern) > len(v.keys):
                    raise RuntimeStateError(f"pattern has {len(pattern)} keys but view {name} has {len(v.keys)}")
                reader = self._reader()
                out = {}
                for row in candidate_rows(form, reader.entries, pattern):
                    inside, value = row_value(form, row, reader)
                    if inside:
                        out[form.key_of(row)] = value
                return self._shown(name, out)
            keys: dict = {}
            for m in v.maps:
                if any(k is not None for k in pattern):
                    keys.update(dict.fromkeys(store.pack(m, k) for k, _ in self._match(m, pattern)))
                else:
                    keys.update(dict.fromkeys(store.stored_keys(m)))
            first = v.maps[0]
            rows = {store.unpack(first, k): plain_value(store, v, k) for k in keys}
            if v.always and not rows:  # an ALWAYS view's one row while its maps hold no entry (NULLs shown)
                rows[()] = 0 if len(v.columns) == 1 else (0,) * len(v.columns)
            return self._shown(name, rows)

    def _shown(self, name: str, rows: dict[tuple, object]) -> dict[tuple, object]:
        """A view's rows with its NULLs shown as None (:class:`boreas.m3.nullable.ViewNulls`)."""
        nulls = self._nulls.get(name)
        return dict(nulls.rows(rows.items(), present=True)) if nulls else rows

    def _match(self, name: str, keys: tuple) -> list[tuple[tuple, object]]:
        """Matching entries, through an index when one covers the bound positions (``MapStore.match``)."""
        if name not in self.store.data:
            raise RuntimeStateError(f"no map named {name!r}")
        try:
            return self.store.match(name, keys)
        except ValueError as exc:
            raise RuntimeStateError(str(exc)) from None

    def read_slice(self, name: str, *keys) -> list[tuple[tuple, object]]:
        with self._lock:
            return self._match(name, keys)

    def read_sum(self, name: str, *keys):
        with self._lock:
            return query.aggregate("sum", self._match(name, keys))

    def read_min(self, name: str, *keys):
        with self._lock:
            return query.aggregate("min", self._match(name, keys))

    def read_max(self, name: str, *keys):
        with self._lock:
            return query.aggregate("max", self._match(name, keys))

    def read_stable(self, name: str, agg: str = "slice", *keys):
        """READ_STABLE: reads never see a half-applied batch (batches hold the lock)."""
        with self._lock:
            return query.aggregate(agg, self._match(name, keys))

    def snapshot(self) -> query.Snapshot:
        """An immutable copy of all maps as of the last completed batch."""
        with self._lock:
            return query.Snapshot(self._version, {name: dict(self.store.items(name)) for name in self.store.data})
