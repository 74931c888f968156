"""The simulator's admin route for a cluster's state: fail a cluster, or bring it back.

``POST /_sim/clusters {"cluster", "state": "ERROR", "detail", "error": {"code", "message"}}``
sets its ``clusterStatus`` as the API reports one (vertex-api.md: ``state``
PROVISIONING | RUNNING | STOPPING | ERROR | UPDATING, ``detail``, ``error`` a google.rpc.Status
with a numeric code); ``"state": "RUNNING"`` brings it back with its nodes. Its
``updateTime`` is now, as a state change stamps it. A cluster out of RUNNING answers no
``:callSlurmRestApi`` (UNAVAILABLE), as a real one does.
"""

from __future__ import annotations

from aiohttp import web

from bot.sandbox.controlplane.http import STATE, cluster_named, json_body
from bot.sandbox.controlplane.rpc import invalid
from bot.sandbox.controlplane.slurm_state import rfc3339
from bot.sandbox.controlplane.state import present

STATES = ("PROVISIONING", "RUNNING", "STOPPING", "ERROR", "UPDATING")


async def sim_clusters(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if request.method != "POST":
        return web.json_response({name: present(c) for name, c in state.clusters.items()})
    body = await json_body(request)
    name = cluster_named(state, body)
    wanted = str(body.get("state") or "")
    if wanted not in STATES:
        raise invalid(f"state must be one of {', '.join(STATES)}")
    cluster = state.cluster(name)
    status: dict[str, object] = {"state": wanted}
    if wanted == "RUNNING":
        status["nodesStatus"] = state.nodes_status(cluster, "RUNNING")
    if body.get("detail"):
        status["detail"] = str(body["detail"])
    error = body.get("error")
    if isinstance(error, dict):
        status["error"] = {
            "code": int(error.get("code", 13)),
            "message": str(error.get("message", "")),
        }
    cluster["clusterStatus"] = status
    cluster["updateTime"] = rfc3339(state.wall())
    return web.json_response(present(cluster))
