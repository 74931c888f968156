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
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic
from urllib.parse import quote

import aiohttp
from pydantic.alias_generators import to_camel

from bot.vertex.paced import SLICE, SMALL, Keep, SlurmAnswer, answer_of, read_slurm_stream
from bot.vertex.pages import C, K, UnreadableCluster, read_page, same
from bot.vertex.summary import ClusterSummary
from bot.vertex.transport import Transport, read_model, read_model_json
from handlers.domain.errors import (
    DeadlineExceededError,
    InvalidArgumentError,
    MalformedReplyError,
    NotFoundError,
    UnknownError,
    VertexError,
)
from handlers.domain.models import Cluster
from handlers.domain.names import OPERATION_RE, ClusterName, Target
from handlers.domain.operations import Operation, SlurmResponse

API_VERSION = "v1beta1"
OPERATIONS_VERSION = "v1"
SLURM_METHODS = {
    "GET": "HTTP_METHOD_GET",
    "POST": "HTTP_METHOD_POST",
    "DELETE": "HTTP_METHOD_DELETE",
}


@dataclass(frozen=True)
class TargetListing:
    """The clusters of one target, or why they could not be listed."""

    target: Target
    clusters: list[Cluster]
    error: VertexError | None = None
    unreadable: list[UnreadableCluster] = field(default_factory=list)


@dataclass(frozen=True)
class KeptListing(Generic[K]):
    """What a caller kept of each cluster of one target (``keep`` applied page by page, so
    the whole resources never pile up), or why they could not be listed."""

    target: Target
    kept: list[K]
    error: VertexError | None = None
    unreadable: list[UnreadableCluster] = field(default_factory=list)


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


async def read_slurm_content(content: aiohttp.StreamReader, lists: dict[str, Keep]) -> SlurmAnswer:
    """A ``:callSlurmRestApi`` reply as it arrives: a short one decoded at once (a sweep reads
    many), a long one a piece at a time."""
    start: list[bytes] = []
    size = 0
    async for chunk in content.iter_chunked(SLICE):
        start.append(chunk)
        size += len(chunk)
        if size >= SMALL:
            return await read_slurm_stream(_continued(start, content), lists)
    reply = read_model_json(SlurmResponse, b"".join(start), "a Slurm reply")
    return answer_of(reply, lists)


async def _continued(start: list[bytes], content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    while start:
        yield start.pop(0)
    async for chunk in content.iter_chunked(SLICE):
        yield chunk


class VertexClient(Transport):
    def _collection_url(self, target: Target) -> str:
        parent = f"{self.endpoint(target.region)}/{API_VERSION}/{target.parent}"
        return f"{parent}/modelDevelopmentClusters"

    def _cluster_url(self, name: ClusterName, suffix: str = "") -> str:
        # the parts fit the API's patterns (ClusterName.parse); quoted all the same, so that
        # nothing of a name can ever reach the URL as a separator
        parts = "/".join(quote(p, safe="") for p in str(name).split("/"))
        return f"{self.endpoint(name.region)}/{API_VERSION}/{parts}{suffix}"

    # -- reads -----------------------------------------------------------------------------

    async def _pages(
        self, target: Target, model: type[C], keep: Callable[[C], K], deadline: float | None
    ) -> AsyncIterator[tuple[list[K], list[UnreadableCluster]]]:
        """What is kept of a target's clusters a page at a time, following nextPageToken, with
        the clusters of each page that could not be read. A page is decoded straight from its
        bytes; only a page with a cluster that does not fit is read again cluster by cluster,
        to name it."""
        url = self._collection_url(target)
        token: str | None = None
        seen: set[str] = set()
        while True:
            params = {"pageSize": str(self._page_size)}
            if token:
                params["pageToken"] = token
            body = await self._call_raw(
                "list", "GET", url, params=params, safe=True, deadline=deadline
            )
            kept, unreadable, next_token = read_page(body, model, keep)
            yield kept, unreadable
            token = next_token or None
            if token is None:
                return
            if token in seen:
                raise UnknownError("the control plane repeated a page token while listing")
            seen.add(token)

    async def list_target(self, target: Target, deadline: float | None = None) -> TargetListing:
        """Every cluster of a target; a cluster that cannot be read is named, not fatal. A
        target that cannot be listed raises its ``VertexError``."""
        [kept] = await self._kept([target], Cluster, same, deadline)
        if kept.error is not None:
            raise kept.error
        return TargetListing(kept.target, kept.kept, unreadable=kept.unreadable)

    async def list_clusters(self, target: Target) -> list[Cluster]:
        return (await self.list_target(target)).clusters

    async def list_targets(
        self, targets: Iterable[Target], deadline: float | None = None
    ) -> list[TargetListing]:
        """List several targets concurrently (at most ``concurrency`` at once), in order given.

        One target failing, or taking longer than ``deadline`` seconds, does not hide the
        others: its listing carries the error.
        """
        return [
            TargetListing(k.target, k.kept, k.error, k.unreadable)
            for k in await self._kept(targets, Cluster, same, deadline)
        ]

    async def list_kept(
        self,
        targets: Iterable[Target],
        keep: Callable[[ClusterSummary], K],
        deadline: float | None = None,
    ) -> list[KeptListing[K]]:
        """As ``list_targets``, reading each cluster as a ``ClusterSummary`` and keeping only
        ``keep(summary)`` of it, page by page."""
        return await self._kept(targets, ClusterSummary, keep, deadline)

    async def _kept(
        self,
        targets: Iterable[Target],
        model: type[C],
        keep: Callable[[C], K],
        deadline: float | None,
    ) -> list[KeptListing[K]]:
        bound = asyncio.Semaphore(self._concurrency)

        async def one(target: Target) -> KeptListing[K]:
            kept: list[K] = []
            unreadable: list[UnreadableCluster] = []
            try:
                async with asyncio.timeout(deadline):
                    async with bound:
                        async for page, bad in self._pages(target, model, keep, deadline):
                            kept += page
                            unreadable += bad
            except VertexError as error:
                return KeptListing(target, [], error)
            except TimeoutError:
                late = DeadlineExceededError(f"{target} did not answer within {deadline:g} s")
                return KeptListing(target, [], late)
            return KeptListing(target, kept, unreadable=unreadable)

        return list(await asyncio.gather(*(one(t) for t in targets)))

    async def get_cluster(self, name: str | ClusterName, deadline: float | None = None) -> Cluster:
        parsed = name if isinstance(name, ClusterName) else ClusterName.parse(name)
        reply = await self._call(
            "get", "GET", self._cluster_url(parsed), safe=True, deadline=deadline
        )
        return read_model(Cluster, reply, f"cluster {parsed.cluster_id}")

    async def get_operation(self, name: str) -> Operation:
        if not OPERATION_RE.match(name):  # it came from the control plane: it must look so
            raise InvalidArgumentError(f"{name[:120]!r} is not an operation's name")
        region = name.split("/")[3]
        url = f"{self.endpoint(region)}/{OPERATIONS_VERSION}/{name}"
        # decoded straight from the bytes: the tracker reads one of these per poll
        body = await self._call_raw("get_operation", "GET", url, safe=True)
        return read_model_json(Operation, body, "an operation")

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
        reply = await self._call_raw(
            "call_slurm_rest_api",
            "POST",
            self._cluster_url(parsed, ":callSlurmRestApi"),
            json_body=payload,
            safe=verb == "GET",
            deadline=deadline,
        )
        return read_model_json(SlurmResponse, reply, "a Slurm reply")

    async def get_slurm(
        self, name: str, path: str, lists: dict[str, Keep], deadline: float | None = None
    ) -> SlurmAnswer:
        """``GET`` a slurmrestd path, its JSON read as it arrives (``bot.vertex.paced``): a
        big queue never holds the event loop, nor the memory of its whole reply."""

        async def receive(response: aiohttp.ClientResponse) -> SlurmAnswer:
            return await read_slurm_content(response.content, lists)

        payload = {"method": SLURM_METHODS["GET"], "path": path}
        url = self._cluster_url(ClusterName.parse(name), ":callSlurmRestApi")
        return await self._call_reading(
            "call_slurm_rest_api",
            "POST",
            url,
            receive,
            json_body=payload,
            safe=True,
            deadline=deadline,
        )

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
