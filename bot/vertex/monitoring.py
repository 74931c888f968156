"""GPU utilisation of a cluster's nodes from Cloud Monitoring, for the idle allocations
(``handlers/sweep/gpus.py``): ``GET {base}/v3/projects/{project}/timeSeries``
(https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.timeSeries/list).

The list takes one metric type per call ("The filter must specify a single metric type"),
so each cluster's metric is learned: the first of ``METRICS`` its nodes publish, kept and
asked alone on later sweeps, and every ``REPROBE`` seconds the better ones are tried first
again (an agent configured since publishes DCGM's). A cluster none of them answers for is
asked one of them a sweep, in turn: one call, as for the others, and an agent installed later
is found within as many sweeps as there are metrics. The filter names the nodes'
instance ids, at most ``NAMED`` a call (``one_of``); the reply is the highest value of each
GPU in each slice of the window (``ALIGN_MAX``), a handful of points a GPU. Calls share the
control plane's credentials and retries; nothing leaves but a ``GpuUse``: a failure is its
``problem``, and its nodes count as busy. Monitoring out of reach, or refusing a project, is
not asked again for ``PAUSE`` seconds.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from bot.vertex.transport import Transport
from handlers.domain.errors import (
    PermissionDeniedError,
    TransportError,
    UnauthenticatedError,
    VertexError,
)
from handlers.sweep.gpus import BUCKETS, METRICS, GpuUse, NodeGpus

REPROBE = 3600.0  # seconds a cluster's metric is kept before the best is tried again
NAMED = 100  # instance ids a filter names
PAGES = 20  # pages a call reads at most: a cluster's nodes' points, not millions
PAGE_SIZE = 10_000  # points a page (view FULL: pageSize counts points)
DEADLINE = 10.0  # seconds a cluster's call may take, retries included, as its Slurm's
# seconds Cloud Monitoring is not asked again after it could not be reached (every cluster)
# or refused a project: a sweep of a thousand clusters does not wait on each in turn
PAUSE = 300.0
BOOK = "gpu-metrics"  # the store's named report that keeps what was learned
FORGET = 7 * 24 * 3600.0  # seconds a cluster's learned metric is kept unused


def rfc3339(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _seconds(text: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _value(point: Any) -> float | None:
    """A point's value: ``doubleValue``, or ``int64Value`` (a string in proto3 JSON)."""
    value = point.get("value") if isinstance(point, dict) else None
    if not isinstance(value, dict):
        return None
    for key in ("doubleValue", "int64Value"):
        if key in value:
            try:
                return float(value[key])
            except (TypeError, ValueError):
                return None
    return None


def read_series(
    pages: list[dict[str, Any]], instances: Mapping[str, str], scale: float
) -> dict[str, NodeGpus]:
    """Each node's GPUs from the replies' ``timeSeries``: the slices of each GPU (its
    ``gpu_number`` label, else its ``uuid``) as percentages, newest first, and its newest
    point's time. A series of another instance, or without points, is skipped."""
    slices: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for page in pages:
        for series in page.get("timeSeries") or ():
            if not isinstance(series, dict):
                continue
            labels = (series.get("resource") or {}).get("labels") or {}
            node = instances.get(str(labels.get("instance_id", "")))
            metric = (series.get("metric") or {}).get("labels") or {}
            gpu = str(metric.get("gpu_number", metric.get("uuid", "")))
            if node is None:
                continue
            for point in series.get("points") or ():
                interval = point.get("interval") if isinstance(point, dict) else None
                at = _seconds(interval.get("endTime")) if isinstance(interval, dict) else None
                value = _value(point)
                if at is not None and value is not None:
                    slices.setdefault(node, {}).setdefault(gpu, []).append((at, value * scale))
    found = {}
    for node, gpus in slices.items():
        ordered = {g: sorted(points, reverse=True) for g, points in gpus.items()}
        newest = max(points[0][0] for points in ordered.values())
        found[node] = NodeGpus({g: tuple(v for _at, v in p) for g, p in ordered.items()}, newest)
    return found


class MetricBook(Protocol):
    """Where what was learned of each cluster's metric is kept between sweeps, which may
    each run in a process of their own, and replicas (the store's named reports)."""

    async def latest_report(self, *, kind: str = ...) -> tuple[float, str] | None: ...

    async def save_report(self, at: float, report: str, *, kind: str = ...) -> None: ...


class GpuMetrics:
    """The ``GpuSignal`` on Cloud Monitoring's API."""

    def __init__(
        self,
        transport: Transport,
        base_url: str,
        *,
        book: MetricBook | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.transport = transport
        self.base_url = base_url.rstrip("/")
        self.book = book
        self.clock = clock
        self.chosen: dict[str, tuple[int, float]] = {}  # cluster -> (metric, when learned)
        self.turn: dict[str, int] = {}  # a cluster none answered for: the metric asked next
        self.paused: dict[str, tuple[float, str]] = {}  # project ("": all) -> (until, why)
        self.loading = asyncio.Lock()
        self.loaded = book is None
        self.changed = False

    async def gpu_use(
        self, cluster: str, instances: Mapping[str, str], window: float, now: float
    ) -> GpuUse:
        project = cluster.split("/")[1] if cluster.count("/") >= 3 else cluster
        for key in ("", project):
            until, why = self.paused.get(key, (0.0, ""))
            if self.clock() < until:
                return GpuUse(metric=None, problem=why)
        await self._load()
        try:
            return await self._use(cluster, project, instances, window, now)
        except VertexError as error:
            why = f"Cloud Monitoring: {error.user_message}"
            if isinstance(error, TransportError):  # its words name the control plane
                why = f"Cloud Monitoring at {self.base_url} could not be reached"
                self.paused[""] = (self.clock() + PAUSE, why)
            elif isinstance(error, PermissionDeniedError | UnauthenticatedError):
                self.paused[project] = (self.clock() + PAUSE, why)
            return GpuUse(metric=None, problem=why)

    async def _use(
        self, cluster: str, project: str, instances: Mapping[str, str], window: float, now: float
    ) -> GpuUse:
        chosen = self.chosen.get(cluster)
        if chosen is None or self.clock() - chosen[1] >= REPROBE:
            order = list(range(len(METRICS)))  # the best first, down to the one it had
            if chosen is not None and chosen[0] < len(METRICS):
                order = order[: chosen[0] + 1]
        elif chosen[0] < len(METRICS):
            order = [chosen[0]]
        else:  # none answered: one of them a sweep, in turn, until one does
            order = [self.turn.get(cluster, 0) % len(METRICS)]
            self.turn[cluster] = order[0] + 1
            self.changed = True
        for tried in order:
            metric, scale = METRICS[tried]
            pages = await self._read(project, metric, instances, window, now)
            if any(page.get("timeSeries") for page in pages):
                if chosen is None or chosen[0] != tried or len(order) > 1:
                    self._learn(cluster, tried)
                return GpuUse(metric=metric, nodes=read_series(pages, instances, scale))
        if len(order) > 1 or chosen is None or chosen[0] < len(METRICS):
            self._learn(cluster, len(METRICS))
        return GpuUse(metric=None)

    def _learn(self, cluster: str, metric: int) -> None:
        self.chosen[cluster] = (metric, self.clock())
        self.turn.pop(cluster, None)
        self.changed = True

    async def _load(self) -> None:
        """What earlier sweeps learned, read once (a sweep's first calls wait for it)."""
        if self.loaded or self.book is None:
            return
        async with self.loading:
            if self.loaded:
                return
            saved = await self.book.latest_report(kind=BOOK)
            document = json.loads(saved[1]) if saved else {}
            for cluster, (metric, at) in document.get("chosen", {}).items():
                self.chosen.setdefault(cluster, (int(metric), float(at)))
            for cluster, turn in document.get("turn", {}).items():
                self.turn.setdefault(cluster, int(turn))
            self.loaded = True

    async def keep(self) -> None:
        """Keep what this sweep learned for the next, forgetting clusters not asked for a
        week (deleted, or no longer running GPU jobs)."""
        if self.book is None or not self.changed:
            return
        self.changed = False
        old = self.clock() - FORGET
        self.chosen = {c: kept for c, kept in self.chosen.items() if kept[1] >= old}
        self.turn = {c: t for c, t in self.turn.items() if c in self.chosen}
        document = {"chosen": self.chosen, "turn": self.turn}
        await self.book.save_report(self.clock(), json.dumps(document), kind=BOOK)

    async def _read(
        self, project: str, metric: str, instances: Mapping[str, str], window: float, now: float
    ) -> list[dict[str, Any]]:
        ids = sorted(instances)
        pages: list[dict[str, Any]] = []
        for start in range(0, len(ids), NAMED):
            named = ",".join(f'"{i}"' for i in ids[start : start + NAMED])
            params = {
                "filter": (
                    f'metric.type = "{metric}" AND resource.type = "gce_instance" '
                    f"AND resource.labels.instance_id = one_of({named})"
                ),
                "interval.startTime": rfc3339(now - window),
                "interval.endTime": rfc3339(now),
                "aggregation.alignmentPeriod": f"{max(60, int(window / BUCKETS))}s",
                "aggregation.perSeriesAligner": "ALIGN_MAX",
                "pageSize": str(PAGE_SIZE),
            }
            token = ""
            for _ in range(PAGES):
                asked = params | ({"pageToken": token} if token else {})
                page = await self.transport._call(
                    "timeSeries.list",
                    "GET",
                    f"{self.base_url}/v3/projects/{project}/timeSeries",
                    params=asked,
                    safe=True,
                    deadline=DEADLINE,
                )
                pages.append(page)
                token = str(page.get("nextPageToken") or "")
                if not token:
                    break
        return pages
