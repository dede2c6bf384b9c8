"""The upper stages of a window join (m3/compiler/winjoin.py), compiled and evaluated once per closed window.

Why a batch evaluation: an upper stage reads only closed windows' rows,
which never change again, so there is nothing to maintain: each stage's
program (the stage's SELECT over ``CREATE STREAM`` relations typed like the
views it reads) is evaluated over one window's rows with
:meth:`.runtime.program.Runtime.load` (each map's defining query over the
rows), its view read, and the next stage up fed with them.  Nothing is kept
between windows: the windowed box's state is its leaves' maps, per open
window, dropped as windows close.

>>> from .compiler.winjoin import split
>>> from .compiler.pipeline import compile_sql
>>> s = split('''CREATE STREAM B(a INT, t INT);
... SELECT X.a, X.n FROM (SELECT a, COUNT(*) AS n, window_end AS e FROM TABLE(TUMBLE(TABLE B, DESCRIPTOR(t), 10))
... GROUP BY a, window_end) X JOIN (SELECT MAX(Y.n) AS m, Y.e FROM (SELECT a, COUNT(*) AS n, window_end AS e
... FROM TABLE(TUMBLE(TABLE B, DESCRIPTOR(t), 10)) GROUP BY a, window_end) Y GROUP BY Y.e) Z
... ON X.e = Z.e AND X.n >= Z.m''')
>>> leaf = Runtime(compile_sql(s.leaves_text))
>>> stages = plan_stages(s, leaf.program, leaf.views)
>>> rows = {v: [(k, val) for k, val in pairs] for v, pairs in (("Q1", [((1, 10), 2), ((2, 10), 1)]),
...                                                           ("Q2", [((1, 10), 2), ((2, 10), 1)]))}
>>> sorted(stages.evaluate(rows, stages.runtimes()).items())
[((1, 2), 1)]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter

import pyarrow as pa

from .ast import MapRef, Prod, Program, RelAtom, Var, walk
from .compiler.pipeline import compile_sql
from .compiler.winjoin import Stage, Staged
from .nullable import indicator
from .runtime.ports import ViewInfo
from .runtime.program import Runtime
from .runtime.valuetypes import value_type

#: A stage's relation column type as a ``CREATE STREAM`` writes it.
_DECLARED = {"INT": "INT", "FLOAT": "DOUBLE", "STRING": "VARCHAR", "DATE": "DATE"}


@dataclass(frozen=True)
class _Reader:
    """How to turn a view's ``(key, value)`` rows into a stage relation's rows: where each column is."""

    view: str
    picks: tuple[tuple[bool, int], ...]  # per column: (from the key, position)
    distinct: bool
    count: int | None  # the value position of the multiplicity (a view that is not distinct)

    def rows(self, pairs: Sequence[tuple[tuple, object]]) -> list[tuple]:
        if len(self.picks) > 1 and all(from_key for from_key, _ in self.picks):
            return self._keyed_rows(pairs)
        width = len(pairs[0][0]) if pairs else 0  # a view's keys are all as wide: its values follow them
        pick = _picker(tuple(i if from_key else width + i for from_key, i in self.picks))
        at, out = width + (self.count or 0), []
        for key, value in pairs:
            whole = key + value if isinstance(value, tuple) else key + (value,)
            if self.distinct or (times := int(whole[at])) == 1:
                out.append(pick(whole))
            else:
                out.extend([pick(whole)] * times)
        return out

    def _keyed_rows(self, pairs: Sequence[tuple[tuple, object]]) -> list[tuple]:
        """:meth:`rows` when every column is in the key (a raw stream's leaf): a row by one ``itemgetter``."""
        pick = itemgetter(*(i for _, i in self.picks))
        if self.distinct:
            return [pick(key) for key, _ in pairs]
        at, out = self.count or 0, []
        for key, value in pairs:
            times = int(value[at] if isinstance(value, tuple) else value)
            if times == 1:
                out.append(pick(key))
            else:
                out.extend([pick(key)] * times)
        return out


def _picker(positions: tuple[int, ...]):
    """A row's values at ``positions`` as a tuple, by one ``itemgetter`` (one position: still a tuple).

    >>> _picker((2, 0))((5, 6, 7)), _picker((1,))((5, 6, 7))
    ((7, 5), (6,))
    """
    if len(positions) == 1:
        only = positions[0]
        return lambda row: (row[only],)
    return itemgetter(*positions) if positions else (lambda row: ())


def _reader(program: Program, info: ViewInfo, stage: Stage) -> tuple[_Reader, tuple[tuple[str, str, bool], ...]]:
    """The reader of a stage's view and the stage's columns as (name, type, nullable).

    A column is nullable where the view may show it NULL (:mod:`boreas.m3.nullable`): a key with an internal
    indicator key, a value with its hidden count of values read.  The stage above declares it ``NULL``, so
    its program compares and computes with it as SQL does (a NULL equals nothing, NULL + 1 is NULL), not
    as a Python value (None == None)."""
    decl = program.view(info.name)
    keys = {name.lower(): (i, kind) for i, (name, kind) in enumerate(info.keys)}
    values = {c.name.lower(): j for j, c in enumerate(decl.columns)}
    internal = {name.lower() for name in info.internal}
    picks, typed = [], []
    for column in stage.columns:
        if column.lower() in keys:
            i, kind = keys[column.lower()]
            picks.append((True, i))
            nullable = indicator(column.lower()) in internal and indicator(column.lower()) in keys
        else:
            j = values[column.lower()]
            picks.append((False, j))
            kind = value_type(program, decl, j)
            nullable = indicator(column.lower()) in values
        typed.append((column, kind, nullable))
    count = None if stage.distinct else values.get("count")
    return _Reader(info.name, tuple(picks), stage.distinct, count), tuple(typed)


@dataclass(frozen=True)
class SemiJoin:
    """A leaf whose closed rows count only where they meet a row of another leaf of the same window on equal
    INT columns (an inner equi-join of the stage reading both): the other leaf's rows are read first, and only
    the leaf's entries whose window and those columns hold one of its values are read (and decoded) at all.

    ``leaf``/``other``: the two leaves' views; ``keys``: the leaf's key positions (its view is one map, so
    they are that map's key positions) matched with ``columns``, the other's stage relation columns."""

    leaf: str
    keys: tuple[int, ...]
    other: str
    columns: tuple[int, ...]


@dataclass(frozen=True)
class _Upper:
    stage: Stage
    program: Program
    view: str
    reader: _Reader


@dataclass(frozen=True)
class StagePlan:
    """A window join's stages ready to evaluate: the leaves' views (the box's own), the uppers bottom-up."""

    leaves: tuple[_Reader, ...]
    leaf_relations: tuple[str, ...]
    uppers: tuple[_Upper, ...]
    top: ViewInfo  # the query's view: the box's out port
    semijoins: tuple[SemiJoin, ...] = ()  # leaves read only where they meet another leaf (:func:`_semijoins`)

    def reader(self, view: str) -> _Reader:
        """The reader of leaf view ``view``."""
        return next(r for r in self.leaves if r.view == view)

    @property
    def program(self) -> Program:
        """The query's program (its view is :attr:`top`): the box's out schema is read from it."""
        return self.uppers[-1].program

    def runtimes(self) -> list[Runtime]:
        """A runtime per upper stage, for one box to evaluate with (a plan is shared by the boxes of one text)."""
        return [Runtime(upper.program, backend="python") for upper in self.uppers]

    def evaluate(self, windows: Mapping[str, Sequence[tuple[tuple, object]]],
                 runtimes: Sequence[Runtime]) -> dict[tuple, object]:
        """The query's view rows over one window's leaf rows (``{leaf view: [(key, value)]}``), evaluated on
        ``runtimes`` (:meth:`runtimes`)."""
        return self.evaluate_tables({rel: reader.rows(windows.get(reader.view, ()))
                                     for rel, reader in zip(self.leaf_relations, self.leaves)}, runtimes)

    def evaluate_tables(self, tables: dict[str, Sequence[tuple] | pa.Table],
                        runtimes: Sequence[Runtime]) -> dict[tuple, object]:
        """:meth:`evaluate` over the leaf relations' rows of one window, each a list of rows or a table of
        columns (m3/runtime/closed_columns.py; a relation absent has no row there)."""
        result: dict[tuple, object] = {}
        for upper, rt in zip(self.uppers, runtimes):
            rt.load({r.name: tables.get(r.name, []) for r in rt.program.relations}, views=(upper.view,))
            result = rt.view(upper.view)
            tables[upper.stage.relation] = upper.reader.rows(list(result.items()))
        return result


def plan_stages(staged: Staged, program: Program, views: Mapping[str, ViewInfo]) -> StagePlan:
    """Compile the uppers of ``staged`` over the leaves' ``program`` (its views in leaf order)."""
    types: dict[str, tuple[tuple[str, str, bool], ...]] = {}
    leaves = []
    for leaf, decl in zip(staged.leaves, program.views):
        reader, types[leaf.relation] = _reader(program, views[decl.name], leaf)
        leaves.append(reader)
    uppers = []
    for stage in staged.uppers:
        streams = "".join(f"CREATE STREAM {r}({', '.join(_declared(c) for c in types[r])});\n"
                          for r in dict.fromkeys(stage.reads))
        rt = Runtime(compile_sql(streams + stage.select), backend="python")
        decl = rt.program.views[0]
        reader, types[stage.relation] = _reader(rt.program, rt.views[decl.name], stage)
        uppers.append(_Upper(stage, rt.program, decl.name, reader))
    relations = tuple(leaf.relation for leaf in staged.leaves)
    plan = StagePlan(tuple(leaves), relations, tuple(uppers), rt.views[decl.name])
    return StagePlan(plan.leaves, relations, plan.uppers, plan.top, _semijoins(plan, program, views, types))


def _declared(column: tuple[str, str, bool]) -> str:
    """A stage relation's column as its ``CREATE STREAM`` declares it (a nullable one ``NULL``).

    >>> _declared(("v", "INT", True)), _declared(("s", "STRING", False))
    ('v INT NULL', 's VARCHAR')
    """
    name, kind, nullable = column
    return f"{name} {_DECLARED[kind]}{' NULL' if nullable else ''}"


def _equal_columns(definition, leaf: str, other: str) -> set[tuple[int, int]] | None:
    """The ``(leaf column, other column)`` pairs a map definition joins on when it is a product with one atom
    of ``leaf`` and one of ``other`` as factors, sharing a variable there, ``leaf`` read nowhere else and no
    map read (so a ``leaf`` row meeting no ``other`` row adds nothing to the map); else None."""
    if not isinstance(definition, Prod) or any(isinstance(n, MapRef) for n in walk(definition)):
        return None
    if sum(isinstance(n, RelAtom) and n.name == leaf for n in walk(definition)) != 1:
        return None
    mine = next((f for f in definition.factors if isinstance(f, RelAtom) and f.name == leaf), None)
    if mine is None:  # (read inside a sum or a condition: not a factor of every row)
        return None
    pairs = {(i, j) for f in definition.factors if isinstance(f, RelAtom) and f.name == other
             for i, a in enumerate(mine.args) for j, b in enumerate(f.args)
             if isinstance(a, Var) and isinstance(b, Var) and a.name == b.name}
    return pairs or None


def _columns_at(columns: tuple[tuple[str, str, bool], ...]) -> dict[int, int]:
    """A stage relation's position in its program (a nullable column followed by its NULL indicator) -> the
    column's index among ``columns``; an indicator's position is not in it.

    >>> _columns_at((("k", "INT", False), ("m", "INT", True), ("e", "INT", False)))
    {0: 0, 1: 1, 3: 2}
    """
    at, position = {}, 0
    for index, (_, _, nullable) in enumerate(columns):
        at[position] = index
        position += 2 if nullable else 1
    return at


def _semijoins(plan: StagePlan, program: Program, views: Mapping[str, ViewInfo],
               types: Mapping[str, tuple[tuple[str, str, bool], ...]]) -> tuple[SemiJoin, ...]:
    """Each leaf that only one upper stage reads, as an inner equi-join on INT columns with another leaf whose
    view's key is narrower (the side read first: its rows are fewer to decode), where the leaf's view is one
    map whose keys hold those columns: read only where it meets that leaf (:class:`SemiJoin`)."""
    found = []
    for leaf_rel, reader in zip(plan.leaf_relations, plan.leaves):
        readers = [u for u in plan.uppers if leaf_rel in u.stage.reads]
        decl = program.view(reader.view)
        if len(readers) != 1 or decl.plain_map is None:
            continue
        upper = readers[0]
        view = upper.program.views[0]
        if view.general:
            continue
        for other_rel, other in zip(plan.leaf_relations, plan.leaves):
            if other_rel == leaf_rel or other_rel not in upper.stage.reads:
                continue
            if len(views[other.view].keys) >= len(views[reader.view].keys):
                continue
            common = None
            for name in view.maps:
                pairs = _equal_columns(upper.program.map(name).definition, leaf_rel, other_rel)
                common = pairs if common is None or pairs is None else common & pairs
                if pairs is None:
                    break
            at_leaf, at_other = _columns_at(types[leaf_rel]), _columns_at(types[other_rel])
            pairs = [(at_leaf[i], at_other[j]) for i, j in common or () if i in at_leaf and j in at_other]
            usable = sorted((reader.picks[i][1], j) for i, j in pairs
                            if reader.picks[i][0] and types[leaf_rel][i][1] == "INT"
                            and types[other_rel][j][1] == "INT")
            if usable:
                found.append(SemiJoin(reader.view, tuple(k for k, _ in usable), other.view,
                                      tuple(j for _, j in usable)))
                break
    leaves = {s.leaf for s in found}
    return tuple(s for s in found if s.other not in leaves)  # (the other side is read whole)
