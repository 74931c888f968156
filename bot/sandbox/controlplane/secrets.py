"""Secret Manager's ``access`` method, so that settings given as ``sm://`` references are
read end to end against the simulator as they are against Google.

``GET /v1/projects/{project}/secrets/{secret}/versions/{version}:access`` answers
``{"name", "payload": {"data", "dataCrc32c"}}``: the data base64 (bytes), the checksum a
decimal int64 as a string, since proto3 JSON writes 64-bit integers as strings
(https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets.versions/access,
https://cloud.google.com/secret-manager/docs/reference/rest/v1/SecretPayload). The name in the
reply uses the project number, and ``latest`` is replaced by the version it names, as Google
does. The admin API ``/_sim/secrets`` adds versions, disables them and takes access away.
"""

from __future__ import annotations

import base64

from aiohttp import web

from bot.sandbox.controlplane.http import STATE, json_body
from bot.sandbox.controlplane.rpc import SimError, invalid
from bot.sandbox.controlplane.secret_store import Secret, crc32c

ACCESS = "/{api:v1}/projects/{project}/secrets/{secret}/versions/{version}:access"


async def access_secret(request: web.Request) -> web.Response:
    state = request.app[STATE]
    project, name = request.match_info["project"], request.match_info["secret"]
    asked = request.match_info["version"]
    number = state.project_number(project)
    resource = f"projects/{project}/secrets/{name}/versions/{asked}"
    secret = state.secret_store.secrets.get((project, name))
    if secret is not None and not secret.readable:
        # without the permission Google does not say whether the secret exists
        raise SimError(
            "PERMISSION_DENIED",
            f"Permission 'secretmanager.versions.access' denied for resource '{resource}' "
            "(or it may not exist).",
        )
    if secret is None or not secret.versions:
        raise SimError(
            "NOT_FOUND",
            f"Secret [projects/{number}/secrets/{name}] not found or has no versions.",
        )
    version = _version_number(asked, secret)
    full = f"projects/{number}/secrets/{name}/versions/{version}"
    if version > len(secret.versions):
        raise SimError("NOT_FOUND", f"Secret Version [{full}] not found.")
    if version in secret.disabled:
        raise SimError("FAILED_PRECONDITION", f"Secret Version [{full}] is in DISABLED state.")
    data = secret.versions[version - 1]
    payload = {"data": base64.b64encode(data).decode(), "dataCrc32c": str(crc32c(data))}
    return web.json_response({"name": full, "payload": payload})


def _version_number(asked: str, secret: Secret) -> int:
    if asked == "latest":  # the newest version, enabled or not
        return len(secret.versions)
    if not asked.isdigit() or int(asked) < 1:
        raise invalid(
            f"Invalid version id: {asked}. A version id must be a positive integer or 'latest'."
        )
    return int(asked)


async def sim_secrets(request: web.Request) -> web.Response:
    store = request.app[STATE].secret_store
    if request.method == "POST":
        return web.json_response(store.change(await json_body(request)), status=201)
    if request.method == "DELETE":
        store.secrets.clear()
    rows = [
        {"project": p, "secret": s, "versions": len(v.versions), "readable": v.readable}
        for (p, s), v in store.secrets.items()
    ]
    return web.json_response({"secrets": rows})


def add_routes(app: web.Application) -> None:
    app.router.add_get(ACCESS, access_secret)
    app.router.add_route("*", "/_sim/secrets", sim_secrets)
