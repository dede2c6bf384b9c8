"""``/healthz`` and ``/readyz`` for every component: liveness, and readiness as named checks.

Orchestrators (systemd, Kubernetes, a load balancer, ``boreas cluster up``)
ask two different questions.  *Is the process up?* -- ``GET /healthz``
answers 200 whenever the event loop serves requests; restarting a process
that answers it would not help.  *Should it be sent work?* --
``GET /readyz`` runs the component's checks and answers 200 only when all
pass, else 503 naming each failing check and why, so whoever reads the
answer knows what to fix.

The checks are passed in by the component that owns them (the Head: its
store and catalog; a node: registration, sync, recovery), so this module
knows nothing about any component and importing it starts nothing.  A
check is a callable, plain or async, that returns ``None`` (or ``True``)
when it passes and a reason (a string, or ``False``) when it does not; one
that raises or takes longer than ``timeout`` fails with that as the reason.

>>> import asyncio
>>> health = Health("demo", {"store": lambda: None, "catalog": lambda: "not loaded yet"})
>>> asyncio.run(health.readiness())
(False, {'store': 'ok', 'catalog': 'not loaded yet'})
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web

from .openapi import describe_routes

log = logging.getLogger(__name__)

#: What a check returns: None or True (passes), a reason or False (fails); possibly awaitable.
CheckResult = str | bool | None
Check = Callable[[], CheckResult | Awaitable[CheckResult]]

#: Seconds one check may take before it counts as failing.
CHECK_TIMEOUT = 2.0

OK = "ok"


class Health:
    """One component's liveness and readiness routes over the checks it names."""

    def __init__(self, component: str, checks: Mapping[str, Check], timeout: float = CHECK_TIMEOUT):
        self.component = component
        self.checks = dict(checks)
        self.timeout = timeout

    async def readiness(self) -> tuple[bool, dict[str, str]]:
        """Run every check (at once); ``(all passed, {check: "ok" or why it fails})``."""
        names = list(self.checks)
        results = await asyncio.gather(*(self._run(name) for name in names))
        verdicts = dict(zip(names, results))
        return all(v == OK for v in verdicts.values()), verdicts

    async def _run(self, name: str) -> str:
        try:
            result = self.checks[name]()
            if inspect.isawaitable(result):
                result = await asyncio.wait_for(result, self.timeout)
        except asyncio.TimeoutError:
            return f"no answer within {self.timeout:g} s"
        except Exception as exc:  # a check that breaks says so; it must not break /readyz
            log.debug("%s: readiness check %s raised", self.component, name, exc_info=True)
            return f"{type(exc).__name__}: {exc}"
        if result is None or result is True:
            return OK
        return "failed" if result is False else str(result)

    async def handle_healthz(self, request: web.Request) -> web.Response:
        """The process is up and its event loop answers."""
        return web.json_response({"component": self.component, "status": "up"})

    async def handle_readyz(self, request: web.Request) -> web.Response:
        """200 when every readiness check passes, else 503 naming each failing check and why."""
        ready, verdicts = await self.readiness()
        failing = {name: why for name, why in verdicts.items() if why != OK}
        body = {"component": self.component, "status": "ready" if ready else "not ready",
                "checks": verdicts, "failing": failing}
        return web.json_response(body, status=200 if ready else 503)

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/healthz", self.handle_healthz)
        app.router.add_get("/readyz", self.handle_readyz)
        describe_routes(app, HEALTH_DOCS)


_CHECKS_SCHEMA = {"type": "object", "additionalProperties": {"type": "string"},
                  "description": "check name -> \"ok\" or the reason it fails"}
_READY_SCHEMA = {
    "type": "object", "required": ["component", "status", "checks", "failing"],
    "properties": {"component": {"type": "string"}, "status": {"type": "string", "enum": ["ready", "not ready"]},
                   "checks": _CHECKS_SCHEMA, "failing": _CHECKS_SCHEMA},
}

#: How :mod:`boreas.wire.openapi` describes the two routes.
HEALTH_DOCS = {
    ("GET", "/healthz"): {
        "summary": "Liveness: the process is up",
        "responses": {200: {"description": "up", "schema": {
            "type": "object", "properties": {"component": {"type": "string"},
                                             "status": {"type": "string", "enum": ["up"]}}}}},
    },
    ("GET", "/readyz"): {
        "summary": "Readiness: every check of this component passes",
        "responses": {200: {"description": "ready: every check passed", "schema": _READY_SCHEMA},
                      503: {"description": "not ready: `failing` names each failing check and why",
                            "schema": _READY_SCHEMA}},
    },
}
