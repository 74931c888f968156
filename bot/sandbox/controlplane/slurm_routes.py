"""The simulator's admin routes for Slurm: a cluster's jobs, how its Slurm behaves, and
its nodes' states."""

from __future__ import annotations

from aiohttp import web

from bot.sandbox.controlplane.http import STATE, cluster_named, json_body


async def sim_jobs(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if request.method == "POST":
        body = await json_body(request)
        name = cluster_named(state, body)
        jobs = state.set_jobs(name, body)
        return web.json_response({"cluster": name, "jobs": jobs})
    return web.json_response({"jobs": state.jobs})


async def sim_slurm(request: web.Request) -> web.Response:
    """Set how a cluster's Slurm behaves: ``{"cluster", "down", "private_jobs", "release",
    "versions"}`` (a release, 24.05 to 26.05, serves the data parsers it ships)."""
    state = request.app[STATE]
    if request.method == "POST":
        body = await json_body(request)
        name = cluster_named(state, body)
        switches = state.set_slurm(name, body)
        return web.json_response({"cluster": name, **switches.to_dict()})
    return web.json_response({name: s.to_dict() for name, s in state.slurm.items()})


async def sim_nodes(request: web.Request) -> web.Response:
    """Set Slurm node states and reasons: ``{"cluster", "nodes": {NAME: {"state", "reason"}}}``
    (``{"state": ["IDLE", "DRAIN"], "reason": "ECC memory error"}``; null clears one)."""
    state = request.app[STATE]
    if request.method == "POST":
        body = await json_body(request)
        name = cluster_named(state, body)
        return web.json_response({"cluster": name, "nodes": state.set_nodes(name, body)})
    return web.json_response({name: s.nodes for name, s in state.slurm.items() if s.nodes})
