"""The simulator's admin routes for Slurm: a cluster's jobs, how its Slurm behaves, its
nodes' states and its reservations. Each route sets one cluster's (POST, ``{"cluster", ...}``)
or lists every cluster's (GET)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aiohttp import web

from bot.sandbox.controlplane.http import STATE, cluster_named, json_body
from bot.sandbox.controlplane.state import SimulatorState

Setter = Callable[[SimulatorState, str, dict[str, Any]], dict[str, Any]]
Lister = Callable[[SimulatorState], Any]


async def _route(request: web.Request, set_them: Setter, listed: Lister) -> web.Response:
    state = request.app[STATE]
    if request.method != "POST":
        return web.json_response(listed(state))
    body = await json_body(request)
    name = cluster_named(state, body)
    return web.json_response({"cluster": name, **set_them(state, name, body)})


async def sim_jobs(request: web.Request) -> web.Response:
    return await _route(
        request,
        lambda state, name, body: {"jobs": state.set_jobs(name, body)},
        lambda state: {"jobs": state.jobs},
    )


async def sim_slurm(request: web.Request) -> web.Response:
    """Set how a cluster's Slurm behaves: ``{"cluster", "down", "private_jobs", "release",
    "versions"}`` (a release, 23.11 to 26.05, serves the data parsers it ships)."""
    return await _route(
        request,
        lambda state, name, body: state.set_slurm(name, body).to_dict(),
        lambda state: {name: s.to_dict() for name, s in state.slurm.items()},
    )


async def sim_nodes(request: web.Request) -> web.Response:
    """Set Slurm node states and reasons: ``{"cluster", "nodes": {NAME: {"state", "reason"}}}``
    (``{"state": ["IDLE", "DRAIN"], "reason": "ECC memory error"}``; null clears one)."""
    return await _route(
        request,
        lambda state, name, body: {"nodes": state.set_nodes(name, body)},
        lambda state: {name: s.nodes for name, s in state.slurm.items() if s.nodes},
    )


async def sim_reservations(request: web.Request) -> web.Response:
    """Set a cluster's Slurm reservations: ``{"cluster", "reservations": [{"name",
    "start_time", "end_time", "node_list", "flags"}]}`` (times as epoch seconds, RFC 3339 or
    ``now+2h``; ``flags`` such as ``["MAINT"]``); the list replaces the cluster's."""
    return await _route(
        request,
        lambda state, name, body: {"reservations": state.set_reservations(name, body)},
        lambda state: {name: s.reservations for name, s in state.slurm.items() if s.reservations},
    )
