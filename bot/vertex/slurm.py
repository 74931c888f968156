"""Slurm's view of a cluster, read through the control plane's ``:callSlurmRestApi`` proxy.

slurmrestd's JSON is read here and nowhere else. Per manage-clusters-slurm: a GET carries no
``body``; paths end in a slash (``/slurm/v0.0.42/jobs/``); calls run as the caller's own
Linux account, so other users' jobs may be hidden (PrivateData) while nodes are not; an
unreachable Slurm controller answers UNAVAILABLE ("retry after a short wait"), so the sweep
gives each cluster a short deadline.

Which data parser a cluster's slurmrestd serves is learned, not guessed: the versions are
tried newest first, and the one that answers is kept (in the database, through a
``VersionBook``), so every later read, on any replica and in ``sweep --once``, asks it at once.
A long reply is decoded a piece at a time (``bot.vertex.paced``), never holding the event loop.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol
from urllib.parse import quote

from bot.vertex.client import VertexClient
from bot.vertex.paced import Keep, SlurmAnswer
from handlers.domain.errors import (
    InvalidArgumentError,
    SlurmRefusedError,
    SlurmUnreadableError,
    VertexError,
)
from handlers.domain.operations import Share, SlurmJob, SlurmNode, SlurmReservation

# The data parsers slurmrestd ships (SchedMD/slurm src/plugins/data_parser/ at each release
# tag): 24.05 v0.0.39-41, 24.11 v0.0.40-42, 25.05 v0.0.40-43, 25.11 v0.0.41-44, 26.05
# v0.0.42-45. JOB_INFO and NODE keep the fields read here, with the same names, from v0.0.40
# to v0.0.45 (testsuite/python/data/openapi_specs/). Tried newest first.
READABLE_VERSIONS = ("v0.0.45", "v0.0.44", "v0.0.43", "v0.0.42", "v0.0.41", "v0.0.40")
SWEEP_DEADLINE = 10.0  # seconds a cluster's Slurm may take in all, retries included


class VersionBook(Protocol):
    """Where the data parser each cluster serves is kept between runs."""

    async def slurm_versions(self) -> dict[str, str]: ...

    async def keep_slurm_version(self, cluster: str, version: str, at: float) -> None: ...


def _states(value: Any) -> frozenset[str]:
    """A slurmrestd state: a list of flags (v0.0.40+) or one string (older), upper-cased."""
    if isinstance(value, str):
        return frozenset({value.upper()})
    if isinstance(value, list):
        return frozenset(str(v).upper() for v in value)
    return frozenset()


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= 200 else line[:199] + "…"


def _first_error(errors: Any) -> str:
    """The first of slurmrestd's ``errors``, in its own words (error, then description)."""
    first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
    words = [str(first.get(k)) for k in ("error", "description") if first.get(k)]
    return _first_line(": ".join(dict.fromkeys(words)))


def _error_text(body: str) -> str:
    """slurmrestd's own words for an error: the first of its ``errors`` (JSON replies), or
    the first line of a ``text/plain`` one ("Authentication failure")."""
    try:
        document = json.loads(body) if body.lstrip().startswith("{") else None
    except ValueError:
        document = None
    if isinstance(document, dict):
        return _first_error(document.get("errors"))
    return _first_line(body)


def _unknown_url(reply: SlurmAnswer) -> bool:
    """slurmrestd's answer to a path it does not serve (a data parser it lacks) is a 404 in
    ``text/plain``: "Unable to find requested URL endpoint ..." (the 24.11 and 25.11
    captures); a JSON 404 is an answer about something the path names."""
    return reply.status == 404 and not reply.text.lstrip().startswith("{")


def read_reply(reply: SlurmAnswer, what: str) -> dict[str, Any]:
    """slurmrestd's document, or its status and its own words for why there is none."""
    if reply.status != 200:
        if reply.document is not None:
            detail = _first_error(reply.document.get("errors"))
        else:
            detail = _error_text(reply.text)
        raise SlurmUnreadableError(
            f"slurmrestd answered HTTP {reply.status} to the {what} query"
            + (f": {detail}" if detail else "")
        )
    if reply.document is None:
        raise SlurmUnreadableError(f"slurmrestd sent a {what} reply that is {reply.problem}")
    return reply.document


def _number(value: Any) -> Any:
    """A slurmrestd number: ``{"set", "infinite", "number"}`` (v0.0.40+) or a bare number;
    None when not set or infinite."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    number = _number(value)
    return None if number is None else int(number)


def _float(value: Any) -> float | None:
    number = _number(value)
    return None if number is None else float(number)


def read_job(job: Any) -> SlurmJob | None:
    """One JOB_INFO (job_id, name, user_name, account, partition, job_state, state_reason,
    hold, priority, qos, node_count, nodes, submit_time, start_time, eligible_time,
    time_limit); None
    for an entry that is not an object."""
    if not isinstance(job, dict):
        return None
    return SlurmJob(
        job_id=_int(job.get("job_id")) or 0,
        name=str(job.get("name") or ""),
        user=str(job.get("user_name") or ""),
        account=str(job.get("account") or ""),
        partition=str(job.get("partition") or ""),
        states=_states(job.get("job_state")),
        reason=str(job.get("state_reason") or "None"),
        priority=_int(job.get("priority")),
        qos=str(job.get("qos") or ""),
        node_count=_int(job.get("node_count")) or 0,
        nodes=str(job.get("nodes") or ""),
        submitted=_int(job.get("submit_time")) or None,
        started=_int(job.get("start_time")) or None,
        hold=job.get("hold") is True,
        eligible=_int(job.get("eligible_time")) or None,
        reason_text=str(job.get("state_description") or ""),
        array_id=_int(job.get("array_job_id")) or None,
        array_task=_int(job.get("array_task_id")),
        array_tasks=str(job.get("array_task_string") or "")[:200],
        reservation=str(job.get("resv_name") or "")[:200],
        time_limit=_int(job.get("time_limit")),
    )


def read_node(node: Any) -> SlurmNode | None:
    """One NODE (name, state, reason, who set it and when, partitions); None for an entry
    that is not an object."""
    if not isinstance(node, dict):
        return None
    partitions = node.get("partitions")
    changed = _int(node.get("reason_changed_at"))
    return SlurmNode(
        name=str(node.get("name") or ""),
        states=_states(node.get("state")),
        reason=str(node.get("reason") or ""),
        partitions=tuple(str(p) for p in partitions) if isinstance(partitions, list) else (),
        reason_by=str(node.get("reason_set_by_user") or ""),
        reason_at=float(changed) if changed else None,  # 0: never set
    )


def read_reservation(item: Any) -> SlurmReservation | None:
    """One RESERVATION_INFO (name, start_time, end_time, node_list, flags, partition,
    node_count); None for an entry that is not an object."""
    if not isinstance(item, dict):
        return None
    return SlurmReservation(
        name=str(item.get("name") or "")[:200],
        start=_float(item.get("start_time")) or None,
        end=_float(item.get("end_time")) or None,
        nodes=str(item.get("node_list") or "")[:10_000],
        flags=_states(item.get("flags")),
        partition=str(item.get("partition") or ""),
        node_count=_int(item.get("node_count")) or 0,
    )


def listed(document: dict[str, Any], key: str, what: str) -> list[Any]:
    """The list a reply holds; slurmrestd's own error, when it sent one instead."""
    found = document.get(key)
    if not isinstance(found, list):
        detail = _first_error(document.get("errors"))
        raise SlurmUnreadableError(
            f"slurmrestd's {what} reply has no {what} list" + (f": {detail}" if detail else "")
        )
    return [item for item in found if item is not None]


def read_shares(document: dict[str, Any]) -> list[Share]:
    """The associations of a ``GET /shares`` reply (``shares.shares[]``, each
    ASSOC_SHARES_OBJ_WRAP: a USER row is named for the user, its parent the account)."""
    message = document.get("shares")
    rows = message.get("shares") if isinstance(message, dict) else None
    if not isinstance(rows, list):
        raise SlurmUnreadableError("slurmrestd's shares reply has no share list")
    found = []
    for row in rows:
        if not isinstance(row, dict):
            continue
        is_user = "USER" in _states(row.get("type"))
        fairshare = row.get("fairshare")
        name, parent = str(row.get("name") or ""), str(row.get("parent") or "")
        found.append(
            Share(
                account=parent if is_user else name,
                user=name if is_user else None,
                shares=_int(row.get("shares")),
                shares_normalized=_float(row.get("shares_normalized")),
                usage_normalized=_float(row.get("usage_normalized")),
                effective_usage=_float(row.get("effective_usage")),
                fairshare=_float(fairshare.get("factor")) if isinstance(fairshare, dict) else None,
            )
        )
    return found


class SlurmReader:
    """Reads a cluster's jobs, nodes and shares, asking the data parser the cluster serves."""

    def __init__(
        self,
        *,
        vertex: VertexClient,
        pinned: str | None = None,
        deadline: float = SWEEP_DEADLINE,
        book: VersionBook | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.vertex = vertex
        self.pinned = pinned
        self.deadline = deadline
        self.book = book
        self.clock = clock
        self.known: dict[str, str] = {}  # cluster name -> the version that answered
        self._loaded = book is None
        self._loading = asyncio.Lock()

    async def _load(self) -> None:
        async with self._loading:
            if not self._loaded and self.book is not None:
                self.known = {**await self.book.slurm_versions(), **self.known}
                self._loaded = True

    def versions(self, cluster: str) -> list[str]:
        """The versions to ask, in order: the pinned one alone, or the one the cluster
        answered last and then every readable one, newest first."""
        if self.pinned:
            return [self.pinned]
        return list(
            dict.fromkeys(v for v in (self.known.get(cluster, ""), *READABLE_VERSIONS) if v)
        )

    async def _reply(self, cluster: str, resource: str, lists: dict[str, Keep]) -> SlurmAnswer:
        """``GET /slurm/{version}/{resource}`` at the first version that is served."""
        if not self._loaded:
            await self._load()
        tried = []
        for version in self.versions(cluster):
            path = f"/slurm/{version}/{resource}"
            try:
                reply = await self.vertex.get_slurm(cluster, path, lists, self.deadline)
            except InvalidArgumentError:
                tried.append(version)  # "the path is not a valid Slurm path"
                continue
            except VertexError as error:
                raise SlurmUnreadableError(
                    f"Slurm could not be reached: {error.user_message}"
                ) from error
            if _unknown_url(reply):
                tried.append(version)
                continue
            await self._learned(cluster, version)
            return reply
        if self.pinned:
            raise SlurmUnreadableError(
                f"slurmrestd does not serve {self.pinned}, which CLUSTERBOT_SLURM_API_VERSION "
                "pins; unset it to find the version the cluster serves"
            )
        raise SlurmUnreadableError(
            f"slurmrestd served none of the versions {', '.join(tried)}; set "
            "CLUSTERBOT_SLURM_API_VERSION to the one your node image runs"
        )

    async def _learned(self, cluster: str, version: str) -> None:
        if self.known.get(cluster) == version:
            return
        self.known[cluster] = version
        if self.book is not None and not self.pinned:
            await self.book.keep_slurm_version(cluster, version, self.clock())

    async def get(
        self, cluster: str, resource: str, lists: dict[str, Keep] | None = None
    ) -> dict[str, Any]:
        """The decoded reply to ``GET /slurm/{version}/{resource}``; ``resource`` is spelled
        as slurmrestd's OpenAPI paths are (``jobs/``, ``shares``)."""
        reply = await self._reply(cluster, resource, lists or {})
        return read_reply(reply, resource.strip("/").rstrip("s"))

    async def jobs(self, cluster: str) -> list[SlurmJob]:
        document = await self.get(cluster, "jobs/", {"jobs": read_job})
        return [job for job in listed(document, "jobs", "job") if isinstance(job, SlurmJob)]

    async def nodes(self, cluster: str) -> list[SlurmNode]:
        document = await self.get(cluster, "nodes/", {"nodes": read_node})
        return [n for n in listed(document, "nodes", "node") if isinstance(n, SlurmNode)]

    async def reservations(self, cluster: str) -> list[SlurmReservation]:
        document = await self.get(cluster, "reservations/", {"reservations": read_reservation})
        found = listed(document, "reservations", "reservation")
        return [r for r in found if isinstance(r, SlurmReservation)]

    async def update_node(
        self, cluster: str, node: str, states: Sequence[str], reason: str | None = None
    ) -> None:
        """``POST /slurm/{version}/node/{node}`` with an update_node_msg (``state``, and the
        ``reason`` DOWN and DRAIN carry), at the data parser the cluster answered with;
        ``SlurmRefusedError`` with slurmrestd's words when it refuses (an unknown node is
        422 "Invalid node name specified", a RESUME of a node in service 422 "Invalid node
        state transition"). Sent once: a reply that never came is the caller's to look at."""
        if not self._loaded:
            await self._load()
        message: dict[str, Any] = {"state": list(states)}
        if reason:
            message["reason"] = reason
        for version in self.versions(cluster):
            path = f"/slurm/{version}/node/{quote(node, safe='')}"
            try:
                reply = await self.vertex.call_slurm_rest_api(
                    cluster, path, method="POST", body=message, deadline=self.deadline
                )
            except InvalidArgumentError:
                continue  # "the path is not a valid Slurm path"
            except VertexError as error:
                raise SlurmUnreadableError(
                    f"Slurm could not be reached: {error.user_message}"
                ) from error
            if reply.status == 404 and not reply.body.lstrip().startswith("{"):
                continue  # a data parser it does not serve
            words = _error_text(reply.body)
            if reply.status != 200 or words:
                raise SlurmRefusedError(
                    words or f"slurmrestd answered HTTP {reply.status}", reply.status
                )
            return
        raise SlurmUnreadableError(f"slurmrestd served no version to update node {node} with")

    async def shares(self, cluster: str) -> list[Share]:
        """The fair-share tree; slurmrestd serves it from data parser v0.0.40 on."""
        return read_shares(await self.get(cluster, "shares"))
