"""Async REST client for the modelDevelopmentClusters API (v1beta1) and its operations (v1).

Nothing but a typed ``VertexError`` leaves it: a reply it cannot read becomes a
``MalformedReplyError`` naming the field, and one cluster that cannot be read never hides the
others in a listing.

Reads are retried under AIP-194's rules. A change (PATCH, DELETE, create) that may have
reached the server (any 5xx, 429, a timeout, a broken connection) is never replayed blindly:
the client looks the cluster up first. Applied or in progress: ``AppliedWithoutReplyError``,
and the caller follows the cluster. Visibly not applied: it is sent again while the retry
deadline allows, else the error is raised as a refusal. The look-up itself failing:
``OutcomeUnknownError``.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
from pydantic import BaseModel, ValidationError
from pydantic.alias_generators import to_camel

from bot.vertex.auth import TokenSource
from bot.vertex.errors import (
    AbortedError,
    AppliedWithoutReplyError,
    DeadlineExceededError,
    MalformedReplyError,
    NotFoundError,
    OutcomeUnknownError,
    TransportError,
    UnknownError,
    VertexError,
    error_from_response,
)
from bot.vertex.models import Cluster, ClusterName, Operation, SlurmResponse, Target
from bot.vertex.retry import RetryPolicy, is_retryable, may_have_applied

API_VERSION = "v1beta1"
OPERATIONS_VERSION = "v1"
# view-clusters: "a modelDevelopmentClusters array"; an older manage-cluster page says
# "a clusters array". Both are read.
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
class UnreadableCluster:
    """A cluster in a listing that could not be read, and the field at fault."""

    name: str
    problem: str


@dataclass(frozen=True)
class TargetListing:
    """The clusters of one target, or why they could not be listed."""

    target: Target
    clusters: list[Cluster]
    error: VertexError | None = None
    unreadable: list[UnreadableCluster] = field(default_factory=list)


def _field_path(error: ValidationError) -> str:
    """``nodePools.0.filestores.0: Input should be a valid string`` for the first problem."""
    first = error.errors()[0]
    path = ".".join(to_camel(p) if isinstance(p, str) else str(p) for p in first["loc"])
    return f"{path or 'the reply'}: {first['msg']}"


M = TypeVar("M", bound=BaseModel)


def read_model(model: type[M], document: Any, what: str) -> M:
    """Validate a reply, turning a schema mismatch into a typed error naming the field."""
    try:
        return model.model_validate(document)
    except ValidationError as error:
        raise MalformedReplyError(
            f"the control plane sent {what} that clusterbot cannot read ({_field_path(error)})"
        ) from error


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


def _comparable(value: Any) -> Any:
    """proto3 JSON leaves zero values out: compare with them filled in as zero."""
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if isinstance(value, dict):
        out = {k: _comparable(v) for k, v in value.items() if v not in (0, "", [], {}, None)}
        return out
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

    async def check_credentials(self) -> None:
        """Obtain a token now; raises ``CredentialsError`` saying why it cannot."""
        await self._tokens.token()

    def endpoint(self, region: str) -> str:
        return self._base_url or regional_endpoint(region)

    def _collection_url(self, target: Target) -> str:
        parent = f"{self.endpoint(target.region)}/{API_VERSION}/{target.parent}"
        return f"{parent}/modelDevelopmentClusters"

    def _cluster_url(self, name: ClusterName, suffix: str = "") -> str:
        return f"{self.endpoint(name.region)}/{API_VERSION}/{name}{suffix}"

    # -- reads -----------------------------------------------------------------------------

    async def iter_pages(
        self, target: Target, deadline: float | None = None
    ) -> AsyncIterator[list[Any]]:
        """The raw cluster documents of a target, a page at a time, following nextPageToken."""
        url = self._collection_url(target)
        token: str | None = None
        seen: set[str] = set()
        while True:
            params = {"pageSize": str(self._page_size)}
            if token:
                params["pageToken"] = token
            page = await self._call("list", "GET", url, params=params, safe=True, deadline=deadline)
            items: list[Any] = next(
                (page[k] for k in LIST_KEYS if isinstance(page.get(k), list)), []
            )
            yield list(items)
            next_token = page.get("nextPageToken")
            token = next_token if isinstance(next_token, str) and next_token else None
            if token is None:
                return
            if token in seen:
                raise UnknownError("the control plane repeated a page token while listing")
            seen.add(token)

    async def list_target(self, target: Target, deadline: float | None = None) -> TargetListing:
        """Every cluster of a target; a cluster that cannot be read is named, not fatal."""
        clusters: list[Cluster] = []
        unreadable: list[UnreadableCluster] = []
        async for items in self.iter_pages(target, deadline):
            for item in items:
                try:
                    clusters.append(Cluster.model_validate(item))
                except ValidationError as error:
                    name = item.get("name") if isinstance(item, dict) else None
                    unreadable.append(UnreadableCluster(str(name or "?"), _field_path(error)))
        return TargetListing(target, clusters, unreadable=unreadable)

    async def list_clusters(self, target: Target) -> list[Cluster]:
        return (await self.list_target(target)).clusters

    async def list_targets(
        self, targets: Iterable[Target], deadline: float | None = None
    ) -> list[TargetListing]:
        """List several targets concurrently (at most ``concurrency`` at once), in order given.

        One target failing, or taking longer than ``deadline`` seconds, does not hide the
        others: its listing carries the error.
        """
        bound = asyncio.Semaphore(self._concurrency)

        async def one(target: Target) -> TargetListing:
            try:
                async with asyncio.timeout(deadline):
                    async with bound:
                        return await self.list_target(target, deadline)
            except VertexError as error:
                return TargetListing(target, [], error)
            except TimeoutError:
                late = DeadlineExceededError(f"{target} did not answer within {deadline:g} s")
                return TargetListing(target, [], late)

        return list(await asyncio.gather(*(one(t) for t in targets)))

    async def get_cluster(self, name: str | ClusterName, deadline: float | None = None) -> Cluster:
        parsed = name if isinstance(name, ClusterName) else ClusterName.parse(name)
        reply = await self._call(
            "get", "GET", self._cluster_url(parsed), safe=True, deadline=deadline
        )
        return read_model(Cluster, reply, f"cluster {parsed.cluster_id}")

    async def get_operation(self, name: str) -> Operation:
        region = name.split("/")[3] if name.count("/") >= 5 else ""
        url = f"{self.endpoint(region)}/{OPERATIONS_VERSION}/{name}"
        reply = await self._call("get_operation", "GET", url, safe=True)
        return read_model(Operation, reply, "an operation")

    async def call_slurm_rest_api(
        self,
        name: str | ClusterName,
        path: str,
        *,
        method: str = "GET",
        body: dict[str, Any] | None = None,
        deadline: float | None = None,
    ) -> SlurmResponse:
        """Send one request to the cluster's slurmrestd through the control plane's proxy.

        manage-clusters-slurm: ``body`` is a JSON object, required for HTTP_METHOD_POST and
        omitted for HTTP_METHOD_GET and HTTP_METHOD_DELETE.
        """
        parsed = name if isinstance(name, ClusterName) else ClusterName.parse(name)
        verb = method.upper()
        payload: dict[str, Any] = {"method": SLURM_METHODS[verb], "path": path}
        if verb == "POST":
            payload["body"] = body if body is not None else {}
        elif body is not None:
            raise ValueError(f"a Slurm {verb} request carries no body")
        reply = await self._call(
            "call_slurm_rest_api",
            "POST",
            self._cluster_url(parsed, ":callSlurmRestApi"),
            json_body=payload,
            safe=verb == "GET",
            deadline=deadline,
        )
        return read_model(SlurmResponse, reply, "a Slurm reply")

    # -- changes ---------------------------------------------------------------------------

    async def update_cluster(self, cluster: Cluster, update_mask: Sequence[str]) -> Operation:
        """PATCH the whole resource; only the fields named in ``update_mask`` change."""
        parsed = cluster.parsed_name
        body = cluster.to_api()

        async def applied() -> bool:
            current = (await self.get_cluster(parsed)).to_api()
            if current.get("clusterStatus", {}).get("state") == "UPDATING":
                return True
            return all(
                _comparable(_mask_value(current, p)) == _comparable(_mask_value(body, p))
                for p in update_mask
            )

        reply = await self._call(
            "update",
            "PATCH",
            self._cluster_url(parsed),
            params={"updateMask": ",".join(update_mask)},
            json_body=body,
            safe=False,
            already_applied=applied,
        )
        return await self._operation_from(reply, applied)

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
        return await self._operation_from(reply, applied)

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
        return await self._operation_from(reply, applied)

    async def _operation_from(
        self, reply: dict[str, Any], applied: Callable[[], Awaitable[bool]]
    ) -> Operation:
        """The operation a change answered with. The change was accepted even when the reply
        cannot be read, so an unreadable one leads to the same look-up as a lost one."""
        try:
            return read_model(Operation, reply, "an operation")
        except MalformedReplyError as error:
            await self._check_not_applied(error, applied)
            raise

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
        deadline: float | None = None,
    ) -> dict[str, Any]:
        started = self._clock()
        limit = self._retry.deadline if deadline is None else min(deadline, self._retry.deadline)
        delays = self._retry.delays(self._rng)
        attempts = 0
        while True:
            attempts += 1
            try:
                reply = await self._send(method, url, params, json_body)
            except VertexError as error:
                self._observe(call, error.status)
                ambiguous = may_have_applied(error) or (
                    attempts > 1 and isinstance(error, AbortedError)
                )
                if not safe and ambiguous:
                    # Another replay may not be sent until a look-up shows it did not apply.
                    await self._check_not_applied(error, already_applied)
                if not is_retryable(error, safe=safe or ambiguous):
                    raise
                delay = max(next(delays), error.retry_after or 0.0)
                if self._clock() - started + delay > limit:
                    raise
                await self._sleep(delay)
            else:
                self._observe(call, "ok")
                return reply

    async def _check_not_applied(
        self, error: VertexError, already_applied: Callable[[], Awaitable[bool]] | None
    ) -> None:
        """Return only when a look-up shows that a change which may have reached the server
        did not apply; otherwise raise what the caller must do about it."""
        if already_applied is None:
            raise OutcomeUnknownError(
                "the control plane did not confirm the change, and it may have been applied; "
                "check the cluster before trying again",
                cause=error,
            ) from error
        try:
            applied = await already_applied()
        except VertexError as lookup_error:
            raise OutcomeUnknownError(
                "the control plane did not confirm the change and the cluster could not be "
                f"read to check it ({lookup_error.user_message}); it may have been applied",
                cause=error,
            ) from lookup_error
        if applied:
            raise AppliedWithoutReplyError(
                f"the reply was lost ({error.user_message}), but the cluster shows the change "
                "applied or in progress",
                cause=error,
            ) from error

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
            raise MalformedReplyError("the control plane sent a reply that is not JSON") from error
        if not isinstance(decoded, dict):
            raise MalformedReplyError("the control plane sent a reply that is not a JSON object")
        return decoded

    def _observe(self, call: str, outcome: str) -> None:
        if self._observer is not None:
            self._observer(call, outcome)
