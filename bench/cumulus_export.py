"""CPU of building a Cumulus Push and a Chunk of N entries on the native backend: per entry through Python (what
main does) against the bulk export from C (m3/runtime/native/export.py), in the same run.

A member on the native backend holds ``N`` entries of Q3's ``m2``-like map (an INT key, an INT value) and
of a three-key map (INT, DATE, STRING; a FLOAT value).  Measured with ``time.process_time`` (CPU of this
process), best of ``--repeat``:

* **Push, per entry** (main): ``runtime.read(map, key)`` for every asked key (one C call each), the entries
  gathered in a dict, ``entry_columns.encode_tuples`` (applying.py's ``_serve``);
* **Push, bulk** (branch colNative): ``runtime.exported_at(map, keys)`` (keys encoded once, one ``rt_get_many``)
  and ``entry_columns.encode_exported``;
* **move per entry** (main): a whole segment's move at its source with ``precopy.SourceCopy``: the Python
  mirror brought up to date and listed, every key's slot tested and its value read there, Chunks of
  ``COPY_STEP`` entries made by ``chunk_entries`` from lists, the final chunk, the entries taken out;
* **move bulk**: the same with ``native_copy.NativeSourceCopy``: listed by ``rt_export`` in C, values read by
  ``rt_get_many``, Chunks by ``entry_columns.encode_exported`` (the taking out still per entry).

Both paths' messages are checked equal (decoded) before timing.  ``python bench/cumulus_export.py --n 100000
1000000``; with a tree that has no export module (main), only the per-entry figures print.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import time
from array import array

import numpy as np

from boreas.m3.compiler.pipeline import compile_sql
from boreas.m3.cumulus import even_layout, relayout
from boreas.m3.cumulus.native_member import ColumnRows, NativeMemberRuntime
from boreas.node.cumulus import entry_columns
from boreas.node.cumulus import precopy
from boreas.node.cumulus.precopy import SourceCopy, chunk_entries

try:
    from boreas.m3.runtime.native import export
    from boreas.node.cumulus.native_copy import NativeSourceCopy
except ImportError:  # main: no bulk export
    export = NativeSourceCopy = None

SQL = ("CREATE STREAM R(a INT, d DATE, s STRING, b INT, f DOUBLE); "
       "SELECT a, SUM(b) AS total FROM R GROUP BY a; "
       "SELECT a, d, s, SUM(f) AS amount FROM R GROUP BY a, d, s")


def _runtime(n: int) -> NativeMemberRuntime:
    program = compile_sql(SQL)
    lay = even_layout("g", ["n0"], 1, maps=[(m.name, 0) for m in program.maps])
    rt = NativeMemberRuntime(program, lay, 0)
    assert rt.backend == "native", rt.backend_reason
    rng = random.Random(7)
    days = [dt.date(1995, 1, 1).toordinal() + i for i in range(365)]
    names = ["BUILDING", "AUTOMOBILE", "MACHINERY", "HOUSEHOLD", "FURNITURE"]
    at = 0
    while at < n:
        m = min(200_000, n - at)
        cols = [array("q", range(at, at + m)), [dt.date.fromordinal(rng.choice(days)) for _ in range(m)],
                [rng.choice(names) for _ in range(m)], array("q", [rng.randrange(1, 100) for _ in range(m)]),
                array("d", [rng.random() for _ in range(m)])]
        rt.apply_grouped([("R", 1, ColumnRows(cols))])
        at += m
    return rt


def _cpu(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def _decoded(items: list) -> dict:
    out = {}
    for item in items:
        name, keys, values = entry_columns.decode_tuples(item)
        out.setdefault(name, {}).update(zip(keys, values))
    return out


def _move(rt, copy_of, names) -> list:
    """A whole segment's move at its source: the copy listed, stepped (COPY_STEP entries a step) into Chunks,
    the final chunk, the leaving entries taken out (what the source spends on moving it)."""
    two = even_layout("g", ["n0", "n1"], 1, maps=[(name, 0) for name in names])
    moved = relayout.move(two, 0, 1)
    copy = copy_of(rt, moved, relayout.moves(two, moved), 0)
    copy.start(rt)
    items = []
    while not copy.done:
        for _, payload in copy.step(rt, precopy.COPY_STEP).items():
            items.extend(chunk_entries(payload, rt))
    for _, payload in copy.final(rt).items():
        for piece in precopy.pieces(payload, precopy.COPY_STEP):
            items.extend(chunk_entries(piece, rt))
    copy.take_out(rt, 5)
    return items


def run(n: int, repeat: int, bulk_only: bool = False) -> dict[str, float]:
    rt = _runtime(n)
    arity = rt.store.arity
    names = sorted(rt.store.data)
    keys = {name: [k for k, _ in rt.native_maps().dump(name)] for name in names}

    def push_rows():
        items = []
        for name in names:
            got = {}
            for k in keys[name]:
                got.update(rt.read(name, k))
            items.append(entry_columns.encode_tuples(name, list(got), list(got.values()), arity[name]))
        return items

    def push_bulk():
        return [entry_columns.encode_exported(rt.exported_at(name, keys[name])) for name in names]

    out = {}
    if bulk_only:  # (the bulk figures alone, checked against C's own dump)
        want = {name: dict(zip(keys[name], [v for _, v in rt.native_maps().dump(name)])) for name in names}
    else:
        want = _decoded(push_rows())
        out["push per entry"] = _cpu(push_rows, repeat)
    if export is not None:
        assert _decoded(push_bulk()) == want
        out["push bulk"] = _cpu(push_bulk, repeat)
    paths = ([] if bulk_only else [("move per entry", SourceCopy)]) + \
        ([("move bulk", NativeSourceCopy)] if export is not None else [])
    for label, copy_of in paths:
        best = float("inf")
        for _ in range(repeat):
            fresh = _runtime(n)
            t = time.process_time()
            items = _move(fresh, copy_of, names)
            best = min(best, time.process_time() - t)
            assert _decoded(items) == want and all(fresh.store.size(name) == 0 for name in names)
        out[label] = best
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--bulk-only", action="store_true", help="the bulk figures alone (no per-entry paths)")
    args = ap.parse_args()
    import pyarrow as pa

    pa.array(np.arange(3))  # (pyarrow's first numpy conversion imports pandas, ~0.4 s once per process: not timed)
    entry_columns.encode("warm", [[1]], [1])
    with open("/proc/loadavg") as f:
        print(f"load average {f.read().split()[0]} at the start")
    for n in args.n:
        got = run(n, args.repeat, args.bulk_only)
        line = "  ".join(f"{k}: {v:.3f} s" for k, v in got.items())
        speed = ""
        if "push bulk" in got and "push per entry" in got:
            speed = (f"  (push {got['push per entry'] / got['push bulk']:.1f}x, "
                     f"move {got['move per entry'] / got['move bulk']:.1f}x)")
        with open("/proc/loadavg") as f:
            load = f.read().split()[0]
        print(f"N={n:>9,} per map, 2 maps: {line}{speed}  (load {load})", flush=True)


if __name__ == "__main__":
    main()
