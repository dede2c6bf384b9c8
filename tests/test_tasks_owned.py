"""Every background task has an owner that ends it and hears how it ended (docs/architecture.md, the Supervisor).

A task nobody holds can be garbage collected while it waits, and one that
raises dies silently: its exception is printed, if at all, when the task is
collected, and the work it did just stops.  So every ``create_task`` or
``ensure_future`` (``asyncio.``, a loop's, or imported bare) in the packages
(the tests are not checked: a test may start tasks freely) must keep its task
in one of these ways:

1. it is the :class:`~boreas.wire.supervisor.Supervisor` itself (the owner of
   the rest: ``tasks.spawn(name, factory)`` is how a component starts one);
2. it is a ``TaskGroup``'s (``async with asyncio.TaskGroup() as tg:
   tg.create_task(...)``), which awaits its tasks;
3. the task is stored on ``self`` (``self._task = ...``, ``self._tasks[k] =
   ...``, or a local added with ``self._tasks.add(t)``/``.append(t)`` or
   assigned ``self._task = t``) and a closing method of the class
   (``close``, ``aclose``, ``stop``, ``abort``, ``shutdown``, a name starting
   with one of them, or ``__aexit__``; or a method one of them calls on
   ``self``) awaits that attribute: ``await self._task``, or the attribute
   among the arguments of an awaited call (``await asyncio.gather(*self._chores)``,
   ``await asyncio.wait([self._task])``).  Awaiting is what counts: a task
   cancelled and never awaited may have failed before, unseen;
4. the task is a local awaited in the function that started it (or, for a
   ``nonlocal`` name, in an enclosing one): ``await t``, or ``t`` among the
   arguments of an awaited ``asyncio.wait``/``gather``/``wait_for``/``shield``
   (a list of tasks, ``ts = [create_task(...) for ...]``, counts as ``ts``).

Anything else fails: a task whose result is dropped, only given a done
callback, returned or passed on.  What cannot be fixed yet is in
:data:`ALLOWED` with its reason; an entry no longer needed fails the test.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("head", "node", "regional", "catalog", "cli", "client", "wire", "m3", "spark", "schemas")
STARTS = ("create_task", "ensure_future")
#: A closing method: the names the rule's point 3 looks in.
CLOSER = re.compile(r"(a?close|stop|abort|shutdown)\w*|__aexit__")
WAITERS = ("wait", "gather", "wait_for", "shield")
#: The Supervisor's own tasks are its business (point 1).
SUPERVISOR = ("wire/supervisor.py", "Supervisor")

#: (path under the repository, qualified name of the function that starts the task) -> why it is allowed for now.
ALLOWED: dict[tuple[str, str], str] = {}


def is_start(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Attribute) and func.attr in STARTS) or (isinstance(func, ast.Name)
                                                                       and func.id in STARTS)


def self_attr(node: ast.AST) -> str | None:
    """``X`` for ``self.X`` or ``self.X[...]``; else None."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
        return node.attr
    return None


def awaited_names(scope: ast.AST) -> tuple[list[str], list[str]]:
    """(local names, ``self`` attributes) awaited in ``scope``: the operand of ``await``, or among the
    arguments of an awaited call to one of :data:`WAITERS`.

    >>> awaited_names(ast.parse('''
    ... async def f(self):
    ...     await t
    ...     await asyncio.wait({a, b}, return_when=FIRST_COMPLETED)
    ...     await asyncio.gather(*self._chores, return_exceptions=True)
    ...     await self.queue.put(c)
    ... '''))
    (['a', 'b', 't'], ['_chores'])
    """
    names: set[str] = set()
    attrs: set[str] = set()

    def take(node: ast.AST) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name):
                names.add(sub.id)
            elif (attr := self_attr(sub)) is not None:
                attrs.add(attr)

    for node in ast.walk(scope):
        if not isinstance(node, ast.Await):
            continue
        value = node.value
        if isinstance(value, (ast.Name, ast.Attribute, ast.Subscript)):
            take(value)
        elif isinstance(value, ast.Call):
            func = value.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in WAITERS:
                for arg in value.args:
                    take(arg)
    return sorted(names - {"self"}), sorted(attrs)


def closed_attrs(cls: ast.ClassDef) -> set[str]:
    """The ``self`` attributes a closing method of ``cls`` (or a method it calls on ``self``) awaits."""
    methods = {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    todo = [name for name in methods if CLOSER.fullmatch(name)]
    seen: set[str] = set()
    attrs: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        attrs.update(awaited_names(methods[name])[1])
        for node in ast.walk(methods[name]):
            if isinstance(node, ast.Call) and (callee := self_attr(node.func)) in methods:
                todo.append(callee)
    return attrs


def unowned(path: Path, source: str | None = None, relative: str = "") -> list[tuple[int, str]]:
    """(line, qualified name of the function) of every task start in ``path`` that no owner keeps.

    >>> unowned(Path("x.py"), '''
    ... class A:
    ...     def start(self):
    ...         self._task = asyncio.create_task(self._run())
    ...         t = asyncio.create_task(self._tick())
    ...         self._chores.add(t)
    ...         loop.create_task(self._forgotten())
    ...     async def close(self):
    ...         await self._stop()
    ...     async def _stop(self):
    ...         self._task.cancel()
    ...         await asyncio.gather(self._task, *self._chores)
    ... async def main():
    ...     done = asyncio.create_task(f())
    ...     lost = asyncio.ensure_future(f())
    ...     many = [asyncio.create_task(g(x)) for x in xs]
    ...     await done
    ...     await asyncio.gather(*many)
    ...     async with asyncio.TaskGroup() as tg:
    ...         tg.create_task(f())
    ... ''')
    [(7, 'A.start'), (15, 'main')]
    """
    tree = ast.parse(path.read_text() if source is None else source)
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node

    def enclosing(node: ast.AST, kinds: tuple[type, ...]) -> list[ast.AST]:
        found = []
        while node in parents:
            node = parents[node]
            if isinstance(node, kinds):
                found.append(node)
        return found

    functions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
    groups = {item.optional_vars.id for node in ast.walk(tree) if isinstance(node, ast.AsyncWith)
              for item in node.items if isinstance(item.optional_vars, ast.Name)
              and isinstance(item.context_expr, ast.Call) and ast.unparse(item.context_expr.func).endswith("TaskGroup")}
    found = []
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and is_start(call)):
            continue
        scopes = enclosing(call, functions + (ast.ClassDef,))
        qualname = ".".join(getattr(s, "name", "<lambda>") for s in reversed(scopes))
        classes = [s for s in scopes if isinstance(s, ast.ClassDef)]
        cls = classes[0] if classes else None
        if cls is not None and (relative, cls.name) == SUPERVISOR:
            continue  # 1.
        if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) \
                and call.func.value.id in groups:
            continue  # 2.
        kept = closed_attrs(cls) if cls is not None else set()
        parent = parents[call]
        while isinstance(parent, (ast.List, ast.Set, ast.Tuple, ast.Starred, ast.ListComp, ast.SetComp,
                                  ast.comprehension)):
            parent = parents[parent]  # a collection of tasks: its name is the owner's handle
        if isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is not None:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if any(self_attr(t) in kept for t in targets if self_attr(t) is not None):
                continue  # 3.
            local = next((t.id for t in targets if isinstance(t, ast.Name)), None)
            if local is not None and owned_local(local, scopes, kept):
                continue  # 3. (a local handed to self) or 4.
        found.append((call.lineno, qualname))
    return sorted(found)


def owned_local(name: str, scopes: list[ast.AST], kept: set[str]) -> bool:
    """Whether local ``name`` is awaited in its function (or, ``nonlocal``, an enclosing one), or handed to an
    attribute of ``self`` in :func:`closed_attrs`."""
    for scope in scopes:
        if isinstance(scope, ast.ClassDef):
            return False
        if name in awaited_names(scope)[0]:
            return True
        for node in ast.walk(scope):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("add", "append") and self_attr(node.func.value) in kept
                    and any(isinstance(a, ast.Name) and a.id == name for a in node.args)):
                return True
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == name
                    and any(self_attr(t) in kept for t in node.targets)):
                return True
        if not any(isinstance(n, ast.Nonlocal) and name in n.names for n in ast.walk(scope)):
            return False
    return False


@functools.cache
def all_unowned() -> dict[tuple[str, str], list[int]]:
    """(path, function) -> the lines of its unowned task starts, over every module of the packages."""
    out: dict[tuple[str, str], list[int]] = {}
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            for line, qualname in unowned(path, relative=relative):
                out.setdefault((relative, qualname), []).append(line)
    return out


def test_every_background_task_has_an_owner():
    new = [f"{path}:{lines[0]} in {name}" for (path, name), lines in sorted(all_unowned().items())
           if (path, name) not in ALLOWED]
    assert not new, ("tasks nobody owns (spawn them on the component's Supervisor, or keep them on an object "
                     "whose close() awaits them):\n  " + "\n  ".join(new))


def test_the_allow_list_has_no_stale_entries():
    stale = [f"{path}: {name}" for path, name in ALLOWED if (path, name) not in all_unowned()]
    assert not stale, "fixed; remove from ALLOWED:\n  " + "\n  ".join(stale)
