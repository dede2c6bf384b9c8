"""CPU of *receiving* a Cumulus Push and a segment's Chunks of N entries on the native backend: decoded to Python
values and installed from them (what main does) against the bulk install from the Arrow columns' buffers
(``rt_import``: m3/runtime/native/install.py, node/cumulus/entry_install.py), in the same run.

The sender (bench/cumulus_export.py's member: Q3's ``m2``-like map, an INT key and an INT value, and a
three-key map, INT, DATE, STRING keys and a FLOAT value, ``N`` entries each) makes the messages in bulk;
the receiver is a native member of a two-member layout that owns none of those keys.  Measured with
``time.process_time`` (CPU of this process), best of ``--repeat``:

* **Push, Python**: every item decoded to key tuples and values into the ``{(map, key): value}`` dict
  (applying.py's ``_pushed`` without a native runtime), then ``apply_with`` (an empty batch): the entries
  installed in C from Python values (``NativeMaps.load``, each key's owner tested in Python) and removed
  again after the batch;
* **Push, bulk**: ``entry_columns_of`` per item into a ``Pushed``, ``apply_with``: one ``rt_import`` per
  map (the owner test by slot in C) and the removal by the codes kept;
* **move, Python**: the Chunks staged as Python values (``Staging.add_chunk``), merged at the flip
  (``put_in``: the mirror updated, the entries written through to C from it);
* **move, bulk**: the Chunks made codes in C and staged so, merged by ``put_in_codes`` (one ``rt_load`` per
  map, the changes kept as codes).

The receivers' C maps are checked equal after the move.  ``python bench/cumulus_import.py --n 100000``.
"""

from __future__ import annotations

import argparse
import time

from boreas.m3.cumulus import even_layout
from boreas.m3.cumulus.native_member import NativeMemberRuntime
from boreas.m3.runtime.native.install import Pushed
from boreas.node.cumulus import entry_columns
from boreas.node.cumulus.entry_install import entry_columns_of
from boreas.node.cumulus.native_copy import NativeSourceCopy
from boreas.node.cumulus.staging import Staging
from cumulus_export import _move, _runtime


def _receiver(program) -> NativeMemberRuntime:
    lay = even_layout("g", ["n0", "n1"], 1, maps=[(m.name, 0) for m in program.maps])  # member 0 owns every slot
    rt = NativeMemberRuntime(program, lay, 1)
    assert rt.backend == "native", rt.backend_reason
    return rt


def _cpu(fn, repeat: int, fresh=None) -> float:
    best = float("inf")
    for _ in range(repeat):
        arg = fresh() if fresh is not None else None
        t = time.process_time()
        fn(arg)
        best = min(best, time.process_time() - t)
    return best


def run(n: int, repeat: int) -> dict[str, float]:
    sender = _runtime(n)
    names = sorted(m.name for m in sender.program.maps)
    keys = {name: [k for k, _ in sender.native_maps().dump(name)] for name in names}
    push = [entry_columns.encode_exported(sender.exported_at(name, keys[name])) for name in names]
    chunks = _move(_runtime(n), NativeSourceCopy, names)
    program = sender.program
    rt = _receiver(program)

    def push_python(_):
        pushed = {}
        for item in push:
            name, ks, vs = entry_columns.decode_tuples(item)
            pushed.update(((name, k), v) for k, v in zip(ks, vs))
        rt.apply_with([], pushed)

    def push_bulk(_):
        native = rt.native_maps()
        rt.apply_with([], Pushed(native, {}, [entry_columns_of(native, item) for item in push]))

    def move_python(target):
        staging = Staging()
        for item in chunks:
            staging.add_chunk([item])
        staging.merge(target, 5)

    def move_bulk(target):
        staging = Staging()
        for item in chunks:
            staging.add_chunk([item], None, target)
        staging.merge(target, 5)

    native = rt.native_maps()
    assert Pushed(native, {}, [entry_columns_of(native, item) for item in push]).as_dict() == \
        {(name, k): v for item in push for name, ks, vs in [entry_columns.decode_tuples(item)] for k, v in zip(ks, vs)}
    a, b = _receiver(program), _receiver(program)
    move_python(a)
    move_bulk(b)
    for name in names:
        assert sorted(a.native_maps().dump(name)) == sorted(b.native_maps().dump(name)) and len(keys[name]) == \
            b.native_maps().lib.rt_count(b.native_maps().rt, b.native_maps().map_no[name])
    return {"push python": _cpu(push_python, repeat), "push bulk": _cpu(push_bulk, repeat),
            "move python": _cpu(move_python, repeat, lambda: _receiver(program)),
            "move bulk": _cpu(move_bulk, repeat, lambda: _receiver(program))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[100_000])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    entry_columns.encode("warm", [[1]], [1])
    with open("/proc/loadavg") as f:
        print(f"load average {f.read().split()[0]} at the start")
    for n in args.n:
        got = run(n, args.repeat)
        line = "  ".join(f"{k}: {v:.3f} s" for k, v in got.items())
        with open("/proc/loadavg") as f:
            load = f.read().split()[0]
        print(f"N={n:>9,} per map, 2 maps: {line}  (push {got['push python'] / got['push bulk']:.1f}x, "
              f"move {got['move python'] / got['move bulk']:.1f}x)  (load {load})", flush=True)


if __name__ == "__main__":
    main()
