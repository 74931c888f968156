"""The simulator's HTTP face: the real API paths, and an admin API under ``/_sim/``.

API requests need a Bearer token (401 UNAUTHENTICATED otherwise), are recorded in the request
log, and pass through the injected faults. Every error is an AIP-193 body.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from bot.sandbox.controlplane import monitoring, quota, secrets, slurm
from bot.sandbox.controlplane.cluster_routes import sim_clusters
from bot.sandbox.controlplane.faults import Fault
from bot.sandbox.controlplane.http import STATE, json_body
from bot.sandbox.controlplane.page_tokens import page_size
from bot.sandbox.controlplane.quota import QUOTA
from bot.sandbox.controlplane.rpc import STATUS_OF_HTTP, SimError, invalid
from bot.sandbox.controlplane.rules import check_update_mode
from bot.sandbox.controlplane.slurm_routes import sim_jobs, sim_nodes, sim_reservations, sim_slurm
from bot.sandbox.controlplane.slurm_state import rfc3339
from bot.sandbox.controlplane.state import SimulatorState, present

PREFIX = web.AppKey("simulator_prefix", str)
FAULT = web.RequestKey("simulator_fault", Fault)
DROPPED = web.RequestKey("simulator_dropped", bool)
CLUSTERS = "/{version:v1beta1}/projects/{project}/locations/{region}/modelDevelopmentClusters"
OPERATION = "/{version:v1|v1beta1}/projects/{project}/locations/{region}/operations/{op_id}"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(error: SimError, retry_after: int | None = None) -> web.Response:
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return web.json_response(error.body(), status=error.http_status, headers=headers)


def fault_error(fault: Fault) -> web.Response:
    status = fault.status or 503
    name = STATUS_OF_HTTP.get(status, "INTERNAL" if status >= 500 else "UNKNOWN")
    message = fault.message or "The service is currently unavailable."
    response = error_response(SimError(name, message, details=fault.details), fault.retry_after)
    response.set_status(status)
    return response


def api_path(request: web.Request) -> str:
    prefix = request.app[PREFIX]
    return (
        request.path[len(prefix) :] if prefix and request.path.startswith(prefix) else request.path
    )


@web.middleware
async def errors_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except SimError as error:
        return error_response(error)
    except web.HTTPNotFound:
        return error_response(SimError("NOT_FOUND", f"The URL {api_path(request)} was not found."))
    except web.HTTPMethodNotAllowed:
        return error_response(
            SimError("UNIMPLEMENTED", f"{request.method} is not supported on {api_path(request)}.")
        )


@web.middleware
async def api_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Authenticate, log and inject faults into API calls (not into ``/_sim/``)."""
    path = api_path(request)
    if path.startswith("/_sim/"):
        return await handler(request)
    state = request.app[STATE]
    entry: dict[str, Any] = {
        "method": request.method,
        "path": path,
        "query": dict(request.query),
        "time": rfc3339(state.wall()),
    }
    if request.method in ("POST", "PATCH") and request.body_exists:
        try:  # the body is kept by aiohttp: the handler reads it again
            entry["body"] = json.loads(await request.read())
        except (ValueError, UnicodeDecodeError):
            entry["body"] = None  # the handler answers INVALID_ARGUMENT
    state.requests.append(entry)
    state.in_flight += 1
    state.peak_in_flight = max(state.peak_in_flight, state.in_flight)
    try:
        response = await _guarded(request, handler, state, path)
    finally:
        state.in_flight -= 1
    entry["status"] = 0 if request.get(DROPPED) else response.status  # 0: no reply at all
    return response


async def _guarded(
    request: web.Request, handler: Handler, state: SimulatorState, path: str
) -> web.StreamResponse:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return error_response(
            SimError(
                "UNAUTHENTICATED",
                "Request is missing required authentication credential. Expected OAuth 2 "
                "access token, login cookie or other valid authentication credential.",
                reason="CREDENTIALS_MISSING",
            )
        )
    if state.required_token is not None and token.strip() != state.required_token:
        return error_response(
            SimError(
                "UNAUTHENTICATED",
                "Request had invalid authentication credentials.",
                reason="ACCESS_TOKEN_TYPE_UNSUPPORTED",
            )
        )
    fault = state.pick_fault(request.method, path, state.rng.random())
    if fault is not None and fault.when == "before":
        refused = await _interfere(request, fault, held=True)
        if refused is not None:
            return refused
    if fault is not None:
        request[FAULT] = fault
    state.advance()
    try:
        request.app[QUOTA].check(request.method, path, state.clock())
        response = await handler(request)
    except SimError as error:
        response = error_response(error)
    if fault is not None and fault.when == "after":
        # the change happened; only the reply is late, lost or broken off
        return await _interfere(request, fault) or response
    return response


def server_timeout(request: web.Request) -> float | None:
    """The request's ``X-Server-Timeout`` (Google's system parameter: "Timeout in seconds
    for the server to finish processing the request",
    https://cloud.google.com/apis/docs/system-parameters), or None."""
    try:
        value = float(request.headers.get("X-Server-Timeout", ""))
    except ValueError:
        return None
    return value if value > 0 else None


async def _interfere(
    request: web.Request, fault: Fault, *, held: bool = False
) -> web.Response | None:
    """Delay, then drop the connection or answer the fault's error; None lets it through.
    A request ``held`` before it is processed for longer than its ``X-Server-Timeout`` is
    not processed: it ends DEADLINE_EXCEEDED at its timeout, unapplied."""
    if fault.latency_ms:
        delay, limit = fault.latency_ms / 1000, server_timeout(request)
        if held and limit is not None and delay > limit:
            await asyncio.sleep(limit)
            return error_response(
                SimError("DEADLINE_EXCEEDED", "Deadline expired before operation could complete.")
            )
        await asyncio.sleep(delay)
    if fault.drop:
        return dropped(request)
    return fault_error(fault) if fault.status else None


def dropped(request: web.Request) -> web.Response:
    """Close the connection with no reply, as a broken network or proxy would."""
    request[DROPPED] = True
    if request.transport is not None:
        request.transport.abort()
    return web.Response(status=500)  # never reaches the client: the connection is gone


def _operation_failure(request: web.Request) -> dict[str, Any] | None:
    fault = request.get(FAULT)
    if fault is None or fault.operation_error is None:
        return None
    error = fault.operation_error
    status = {"code": int(error.get("code", 13)), "message": str(error.get("message", "error"))}
    details = error.get("details")
    return status | ({"details": details} if isinstance(details, list) else {})


def _parent(request: web.Request) -> str:
    return f"projects/{request.match_info['project']}/locations/{request.match_info['region']}"


# -- the API -------------------------------------------------------------------------------------


async def list_clusters(request: web.Request) -> web.Response:
    state = request.app[STATE]
    parent = _parent(request)
    size = page_size(request.query.get("pageSize", ""), state.page_max)
    offset = state.decode_page_token(parent, request.query.get("pageToken", ""))
    names = sorted(n for n in state.clusters if n.startswith(parent + "/"))
    page = [present(state.cluster(n)) for n in names[offset : offset + size]]
    reply: dict[str, Any] = {state.list_key: page} if page else {}
    if offset + size < len(names):
        reply["nextPageToken"] = state.encode_page_token(parent, offset + size)
    return web.json_response(reply)


async def create_cluster(request: web.Request) -> web.Response:
    state = request.app[STATE]
    query = request.query
    cluster_id = query.get("modelDevelopmentClusterId") or query.get("model_development_cluster_id")
    body = await json_body(request)
    operation = state.create(_parent(request), cluster_id, body, _operation_failure(request))
    return web.json_response(operation.to_api(state.clock()))


def _cluster_name(request: web.Request) -> str:
    cluster = request.match_info["cluster"]
    if ":" in cluster:
        raise SimError("NOT_FOUND", f"The URL {api_path(request)} was not found.")
    return f"{_parent(request)}/modelDevelopmentClusters/{cluster}"


async def get_cluster(request: web.Request) -> web.Response:
    return web.json_response(present(request.app[STATE].cluster(_cluster_name(request))))


async def patch_cluster(request: web.Request) -> web.Response:
    state = request.app[STATE]
    mask = request.query.get("updateMask") or request.query.get("update_mask") or ""
    check_update_mode(request.query.get("updateMode") or request.query.get("update_mode"))
    body = await json_body(request)
    operation = state.update(_cluster_name(request), mask, body, _operation_failure(request))
    return web.json_response(operation.to_api(state.clock()))


async def delete_cluster(request: web.Request) -> web.Response:
    state = request.app[STATE]
    operation = state.delete(_cluster_name(request), _operation_failure(request))
    return web.json_response(operation.to_api(state.clock()))


async def cluster_method(request: web.Request) -> web.Response:
    """``POST .../{id}:callSlurmRestApi``: relay one request to the cluster's slurmrestd.

    manage-clusters-slurm: ``method`` and ``path`` are required; ``body`` is a JSON object,
    required for HTTP_METHOD_POST and omitted for GET and DELETE (google.protobuf.Struct: a
    string is refused); the request stays under 1 MB; a path that is not a Slurm path is
    INVALID_ARGUMENT; an unreachable cluster is UNAVAILABLE ("retry after a short wait").
    """
    cluster_id, _, verb = request.match_info["cluster"].partition(":")
    if verb != "callSlurmRestApi":
        raise SimError("NOT_FOUND", f"The URL {api_path(request)} was not found.")
    state = request.app[STATE]
    name = f"{_parent(request)}/modelDevelopmentClusters/{cluster_id}"
    cluster = state.cluster(name)
    if (request.content_length or 0) >= 1_000_000:
        raise invalid("the request must be smaller than 1 MB")
    body = await json_body(request)
    method = body.get("method", "")
    if method not in ("HTTP_METHOD_GET", "HTTP_METHOD_POST", "HTTP_METHOD_DELETE"):
        raise invalid(
            f"Invalid value at 'method' ({method!r}): use HTTP_METHOD_GET, HTTP_METHOD_POST "
            "or HTTP_METHOD_DELETE"
        )
    path = body.get("path")
    if not isinstance(path, str) or slurm.PATH.match(path) is None:
        raise invalid(f"The path {path!r} is not a valid Slurm path, e.g. /slurm/v0.0.42/jobs/")
    if "body" in body:
        if not isinstance(body["body"], dict):
            raise invalid(
                "Invalid value at 'body' (type.googleapis.com/google.protobuf.Struct): "
                f"{json.dumps(body['body'])[:60]}"
            )
        if method != "HTTP_METHOD_POST":
            raise invalid(f"body must be omitted for {method}")
    elif method == "HTTP_METHOD_POST":
        raise invalid("body is required for HTTP_METHOD_POST")
    state_name = (cluster.get("clusterStatus") or {}).get("state")
    switches = state.switches(name)
    if switches.down or state_name not in ("RUNNING", "UPDATING"):
        raise SimError(
            "UNAVAILABLE",
            f"The cluster {cluster_id} is temporarily unreachable; retry after a short wait.",
        )
    reported = (cluster.get("clusterStatus") or {}).get("nodesStatus") or []
    sizes = {
        pool["id"]: (
            sum(1 for n in reported if n.get("nodePoolId") == pool["id"]),
            int((pool.get("scalingSpec") or {}).get("maxNodeCount", 0)),
        )
        for pool in cluster.get("nodePools", [])
    }
    slurmrestd = slurm.Slurmrestd(
        cluster,
        state.jobs.get(name, []),
        state.wall(),
        release=switches.release,
        versions=switches.versions,
        private_jobs=switches.private_jobs,
        sizes=sizes,
        overrides=switches.nodes,
        reservations=switches.reservations,
        booting=frozenset(switches.booting(cluster_id, state.wall().timestamp())),
    )
    if method == "HTTP_METHOD_POST":
        reply, node, changed = slurmrestd.update(path, body["body"])
        if changed is not None:
            back = changed["state"] == ["IDLE"] and not changed["reason"]
            if back:  # resumed: the node is what the pool and the queue make it
                switches.nodes.pop(node, None)
            else:
                switches.nodes[node] = changed
            state.resettle(name)
        return web.json_response(reply)
    return web.json_response(slurmrestd.reply(method, path))


async def get_operation(request: web.Request) -> web.Response:
    state = request.app[STATE]
    match = request.match_info
    operation = state.operation(match["project"], match["region"], match["op_id"])
    return web.json_response(operation.to_api(state.clock()))


# -- the admin API -------------------------------------------------------------------------------


async def sim_requests(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if request.method == "DELETE":
        state.requests.clear()
        state.peak_in_flight = state.in_flight
        return web.json_response({"requests": [], "peak_in_flight": state.peak_in_flight})
    method = request.query.get("method")
    contains = request.query.get("path")
    rows = [
        r
        for r in state.requests
        if (not method or r["method"] == method.upper()) and (not contains or contains in r["path"])
    ]
    return web.json_response({"requests": rows, "peak_in_flight": state.peak_in_flight})


async def sim_faults(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if request.method == "POST":
        fault = state.add_fault(await json_body(request))
        return web.json_response({"fault": fault.to_api()}, status=201)
    if request.method == "DELETE":
        state.faults.clear()
    return web.json_response({"faults": [f.to_api() for f in state.faults]})


async def sim_config(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if request.method == "POST":
        state.configure(await json_body(request))
    return web.json_response(state.config())


def create_app(state: SimulatorState, prefix: str = "") -> web.Application:
    """The simulator as an aiohttp app; ``prefix`` is where it is mounted, if not at the root."""
    app = web.Application(middlewares=[errors_middleware, api_middleware])
    app[STATE] = state
    app[PREFIX] = prefix
    cluster = CLUSTERS + "/{cluster}"
    app.router.add_get(CLUSTERS, list_clusters)
    app.router.add_post(CLUSTERS, create_cluster)
    app.router.add_get(cluster, get_cluster)
    app.router.add_patch(cluster, patch_cluster)
    app.router.add_delete(cluster, delete_cluster)
    app.router.add_post(cluster, cluster_method)
    app.router.add_get(OPERATION, get_operation)
    app.router.add_route("*", "/_sim/requests", sim_requests)
    app.router.add_route("*", "/_sim/faults", sim_faults)
    app.router.add_route("*", "/_sim/jobs", sim_jobs)
    app.router.add_route("*", "/_sim/config", sim_config)
    app.router.add_route("*", "/_sim/slurm", sim_slurm)
    app.router.add_route("*", "/_sim/nodes", sim_nodes)
    app.router.add_route("*", "/_sim/reservations", sim_reservations)
    app.router.add_route("*", "/_sim/clusters", sim_clusters)
    secrets.add_routes(app)
    monitoring.add_routes(app)
    quota.install(app)
    return app


def mount(parent: web.Application, prefix: str, state: SimulatorState) -> web.Application:
    """Mount the simulator under ``prefix`` (e.g. ``/vertex`` in the demo)."""
    app = create_app(state, prefix)
    parent.add_subapp(prefix, app)
    return app
