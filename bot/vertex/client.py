"""Async REST client for the modelDevelopmentClusters API (v1beta1) and its operations (v1).

Reads are retried under AIP-194's rules. A change (PATCH, DELETE, create) that may have
reached the server is never replayed blindly: the client first looks the cluster up and
replays only when the change visibly did not apply; otherwise it raises
``OutcomeUnknownError`` so the caller can report honestly and check again.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp
from pydantic.alias_generators import to_camel

from bot.vertex.auth import TokenSource
from bot.vertex.errors import (
    NotFoundError,
    OutcomeUnknownError,
    TransportError,
    UnknownError,
    VertexError,
    error_from_response,
)
from bot.vertex.models import Cluster, ClusterName, Operation, SlurmResponse, Target
from bot.vertex.retry import RetryPolicy, is_retryable

API_VERSION = "v1beta1"
OPERATIONS_VERSION = "v1"
LIST_KEYS = ("modelDevelopmentClusters", "clusters")
SLURM_METHODS = {
    "GET": "HTTP_METHOD_GET",
    "POST": "HTTP_METHOD_POST",
    "DELETE": "HTTP_METHOD_DELETE",
}

# (call name, outcome) -> None; outcome is "ok" or a google.rpc status name.
CallObserver = Callable[[str, str], None]


def regional_endpoint(region: str) -> str:
    return f"https://{region}-aiplatform.googleapis.com"


@dataclass(frozen=True)
class TargetListing:
    """The clusters of one target, or why they could not be listed."""

    target: Target
    clusters: list[Cluster]
    error: VertexError | None = None


def _mask_value(document: dict[str, Any], path: str) -> Any:
    """The value at an updateMask path (snake_case segments) in a camelCase document."""
    value: Any = document
    for segment in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(to_camel(segment), value.get(segment))
    if isinstance(value, list) and all(isinstance(v, dict) and "id" in v for v in value):
        # The API may return repeated, id-keyed fields in another order than sent.
        return sorted(value, key=lambda v: str(v["id"]))
    return value


class VertexClient:
    def __init__(
        self,
        tokens: TokenSource,
        *,
        base_url: str | None = None,
        session: aiohttp.ClientSession | None = None,
        retry: RetryPolicy | None = None,
        concurrency: int = 8,
        page_size: int = 100,
        request_timeout: float = 30.0,
        observer: CallObserver | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> None:
        self._tokens = tokens
        self._base_url = base_url.rstrip("/") if base_url else None
        self._session = session
        self._owns_session = session is None
        self._retry = retry or RetryPolicy()
        self._concurrency = max(1, concurrency)
        self._page_size = page_size
        self._timeout = aiohttp.ClientTimeout(total=request_timeout)
        self._observer = observer
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()

    async def __aenter__(self) -> VertexClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    def endpoint(self, region: str) -> str:
        return self._base_url or regional_endpoint(region)

    def _collection_url(self, target: Target) -> str:
        parent = f"{self.endpoint(target.region)}/{API_VERSION}/{target.parent}"
        return f"{parent}/modelDevelopmentClusters"

    def _cluster_url(self, name: ClusterName, suffix: str = "") -> str:
        return f"{self.endpoint(name.region)}/{API_VERSION}/{name}{suffix}"

    # -- reads -----------------------------------------------------------------------------

    async def iter_clusters(self, target: Target) -> AsyncIterator[Cluster]:
        """Every cluster of a target, following ``nextPageToken`` across pages."""
        url = self._collection_url(target)
        token: str | None = None
        seen: set[str] = set()
        while True:
            params = {"pageSize": str(self._page_size)}
            if token:
                params["pageToken"] = token
            page = await self._call("list", "GET", url, params=params, safe=True)
            items: list[Any] = next(
                (page[key] for key in LIST_KEYS if isinstance(page.get(key), list)), []
            )
            for item in items:
                yield Cluster.model_validate(item)
            token = page.get("nextPageToken") or None
            if token is None:
                return
            if token in seen:
                raise UnknownError("the control plane repeated a page token while listing")
            seen.add(token)

    async def list_clusters(self, target: Target) -> list[Cluster]:
        return [cluster async for cluster in self.iter_clusters(target)]

    async def list_targets(self, targets: Iterable[Target]) -> list[TargetListing]:
        """List several targets concurrently (at most ``concurrency`` at once), in order given.

        One target failing does not hide the others: its listing carries the error.
        """
        bound = asyncio.Semaphore(self._concurrency)

        async def one(target: Target) -> TargetListing:
            async with bound:
                try:
                    return TargetListing(target, await self.list_clusters(target))
                except VertexError as error:
                    return TargetListing(target, [], error)

        return list(await asyncio.gather(*(one(t) for t in targets)))

    async def get_cluster(self, name: str | ClusterName) -> Cluster:
        parsed = name if isinstance(name, ClusterName) else ClusterName.parse(name)
        return Cluster.model_validate(
            await self._call("get", "GET", self._cluster_url(parsed), safe=True)
        )

    async def get_operation(self, name: str) -> Operation:
        region = name.split("/")[3] if name.count("/") >= 5 else ""
        url = f"{self.endpoint(region)}/{OPERATIONS_VERSION}/{name}"
        return Operation.model_validate(await self._call("get_operation", "GET", url, safe=True))

    async def call_slurm_rest_api(
        self, name: str | ClusterName, path: str, *, method: str = "GET", body: str = ""
    ) -> SlurmResponse:
        """Send one request to the cluster's slurmrestd through the control plane's proxy."""
        parsed = name if isinstance(name, ClusterName) else ClusterName.parse(name)
        payload = {"method": SLURM_METHODS[method.upper()], "path": path, "body": body}
        reply = await self._call(
            "call_slurm_rest_api",
            "POST",
            self._cluster_url(parsed, ":callSlurmRestApi"),
            json_body=payload,
            safe=method.upper() == "GET",
        )
        return SlurmResponse.model_validate(reply)

    # -- changes ---------------------------------------------------------------------------

    async def update_cluster(self, cluster: Cluster, update_mask: Sequence[str]) -> Operation:
        """PATCH the whole resource; only the fields named in ``update_mask`` change."""
        parsed = cluster.parsed_name
        body = cluster.to_api()

        async def applied() -> bool:
            current = (await self.get_cluster(parsed)).to_api()
            if current.get("clusterStatus", {}).get("state") == "UPDATING":
                return True
            return all(_mask_value(current, p) == _mask_value(body, p) for p in update_mask)

        reply = await self._call(
            "update",
            "PATCH",
            self._cluster_url(parsed),
            params={"updateMask": ",".join(update_mask)},
            json_body=body,
            safe=False,
            already_applied=applied,
        )
        return Operation.model_validate(reply)

    async def delete_cluster(self, name: str | ClusterName) -> Operation:
        parsed = name if isinstance(name, ClusterName) else ClusterName.parse(name)

        async def applied() -> bool:
            try:
                return (await self.get_cluster(parsed)).state == "STOPPING"
            except NotFoundError:
                return True

        reply = await self._call(
            "delete",
            "DELETE",
            self._cluster_url(parsed),
            safe=False,
            already_applied=applied,
        )
        return Operation.model_validate(reply)

    async def create_cluster(self, target: Target, cluster_id: str, cluster: Cluster) -> Operation:
        name = ClusterName(target.project, target.region, cluster_id)

        async def applied() -> bool:
            try:
                await self.get_cluster(name)
            except NotFoundError:
                return False
            return True

        url = self._collection_url(target)
        reply = await self._call(
            "create",
            "POST",
            url,
            params={"modelDevelopmentClusterId": cluster_id},
            json_body=cluster.to_api(),
            safe=False,
            already_applied=applied,
        )
        return Operation.model_validate(reply)

    # -- transport -------------------------------------------------------------------------

    async def _call(
        self,
        call: str,
        method: str,
        url: str,
        *,
        params: dict[str, str] | None = None,
        json_body: dict[str, Any] | None = None,
        safe: bool,
        already_applied: Callable[[], Awaitable[bool]] | None = None,
    ) -> dict[str, Any]:
        started = self._clock()
        delays = self._retry.delays(self._rng)
        while True:
            try:
                reply = await self._send(method, url, params, json_body)
            except VertexError as error:
                self._observe(call, error.status)
                if not is_retryable(error, safe=safe):
                    raise
                if not safe and not (isinstance(error, TransportError) and not error.sent):
                    await self._check_not_applied(error, already_applied)
                delay = max(next(delays), error.retry_after or 0.0)
                if self._clock() - started + delay > self._retry.deadline:
                    raise
                await self._sleep(delay)
            else:
                self._observe(call, "ok")
                return reply

    async def _check_not_applied(
        self, error: VertexError, already_applied: Callable[[], Awaitable[bool]] | None
    ) -> None:
        """Raise unless a lookup shows that a change which may have reached the server did not."""
        unknown = OutcomeUnknownError(
            "the control plane did not confirm the change, and it may have been applied; "
            "check the cluster before trying again",
            cause=error,
        )
        if already_applied is None:
            raise unknown from error
        try:
            applied = await already_applied()
        except VertexError as lookup_error:
            raise unknown from lookup_error
        if applied:
            raise unknown from error

    async def _send(
        self,
        method: str,
        url: str,
        params: dict[str, str] | None,
        json_body: dict[str, Any] | None,
    ) -> dict[str, Any]:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        headers = {"Authorization": f"Bearer {await self._tokens.token()}"}
        try:
            async with self._session.request(
                method, url, params=params, json=json_body, headers=headers, timeout=self._timeout
            ) as response:
                body = await response.read()
                status = response.status
                retry_after = response.headers.get("Retry-After")
        except aiohttp.ClientConnectorError as error:
            host = error.host
            raise TransportError(
                f"could not connect to the control plane at {host}", sent=False
            ) from error
        except (aiohttp.ClientError, TimeoutError) as error:
            raise TransportError(
                "the connection to the control plane broke before it replied", sent=True
            ) from error
        if status >= 400:
            raise error_from_response(status, body, retry_after)
        try:
            decoded = json.loads(body) if body else {}
        except ValueError as error:
            raise UnknownError("the control plane sent a reply that is not JSON") from error
        if not isinstance(decoded, dict):
            raise UnknownError("the control plane sent a reply that is not a JSON object")
        return decoded

    def _observe(self, call: str, outcome: str) -> None:
        if self._observer is not None:
            self._observer(call, outcome)
