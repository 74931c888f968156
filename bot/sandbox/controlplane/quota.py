"""The control plane's request quota on changes, as Google documents it.

Vertex AI counts requests per minute per project and region
(https://cloud.google.com/vertex-ai/docs/quotas, "Request quotas": "Resource management
(CRUD) requests", 600 a minute by default). Past the quota a call is refused, unapplied, with
429 RESOURCE_EXHAUSTED and an ``ErrorInfo`` of reason RATE_LIMIT_EXCEEDED naming the quota
metric and limit (https://cloud.google.com/apis/design/errors, "Error details"). The simulator
counts the changes to clusters (create, patch, delete) over a sliding minute; ``/_sim/quota``
reads and sets the limit (``{"writes_per_minute": N}``, 0 for none) and says how many calls
it refused.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from aiohttp import web

from bot.sandbox.controlplane.http import json_body
from bot.sandbox.controlplane.rpc import SimError, invalid

DEFAULT = 600  # Vertex AI's default: resource management requests a minute per region
WINDOW = 60.0
WRITES = frozenset({"POST", "PATCH", "DELETE"})
# a cluster's own resource or the collection (a create): not a method call (``:verb``)
CHANGED = re.compile(
    r"/v1beta1/projects/(?P<project>[^/]+)/locations/(?P<region>[^/]+)"
    r"/modelDevelopmentClusters(?:/[^/:]+)?$"
)
METRIC = "aiplatform.googleapis.com/resource_management_requests"
LIMIT = "ResourceManagementRequestsPerMinutePerProjectPerRegion"


@dataclass
class Quota:
    writes_per_minute: int = DEFAULT
    calls: dict[tuple[str, str], deque[float]] = field(default_factory=dict)
    refused: int = 0

    def check(self, method: str, path: str, now: float) -> None:
        """Count a change; ``SimError`` RESOURCE_EXHAUSTED when it is over the quota."""
        found = CHANGED.search(path) if method in WRITES else None
        if found is None or self.writes_per_minute <= 0:
            return
        project, region = found["project"], found["region"]
        window = self.calls.setdefault((project, region), deque())
        while window and window[0] <= now - WINDOW:
            window.popleft()
        if len(window) < self.writes_per_minute:
            window.append(now)
            return
        self.refused += 1
        raise SimError(
            "RESOURCE_EXHAUSTED",
            f"Quota exceeded for quota metric '{METRIC}' and limit '{LIMIT}' of service "
            f"'aiplatform.googleapis.com' for consumer 'project:{project}'.",
            details=[
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "RATE_LIMIT_EXCEEDED",
                    "domain": "googleapis.com",
                    "metadata": {
                        "service": "aiplatform.googleapis.com",
                        "quota_metric": METRIC,
                        "quota_limit": LIMIT,
                        "quota_location": region,
                        "consumer": f"projects/{project}",
                    },
                }
            ],
        )


QUOTA = web.AppKey("quota", Quota)


def install(app: web.Application) -> None:
    """Give ``app`` its quota and the ``/_sim/quota`` route."""
    app[QUOTA] = Quota()
    app.router.add_route("*", "/_sim/quota", _sim_quota)


async def _sim_quota(request: web.Request) -> web.Response:
    quota = request.app[QUOTA]
    if request.method == "POST":
        body = await json_body(request)
        value = body.get("writes_per_minute", quota.writes_per_minute)
        if not isinstance(value, int) or value < 0:
            raise invalid("writes_per_minute must be a whole number, 0 for no quota")
        quota.writes_per_minute = value
        quota.calls.clear()
    return web.json_response(
        {"writes_per_minute": quota.writes_per_minute, "refused": quota.refused}
    )
