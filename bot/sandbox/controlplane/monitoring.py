"""Cloud Monitoring's ``projects.timeSeries.list`` for the simulator's GPU nodes, as Google
documents it (https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.timeSeries/list):

- ``GET /v3/projects/{project}/timeSeries`` with ``filter`` (required, naming exactly one
  ``metric.type``: "The filter must specify a single metric type"), ``interval.endTime``
  (required) and ``interval.startTime``, ``aggregation.alignmentPeriod`` and
  ``aggregation.perSeriesAligner`` (ALIGN_NONE, ALIGN_MAX, ALIGN_MEAN), ``pageSize`` (with
  the FULL view, "the maximum number of Points returned") and ``pageToken``.
- The reply: ``{"timeSeries": [...], "nextPageToken", "unit"}``, each series with its
  ``metric`` (type, labels gpu_number, model, uuid), its ``resource`` (``gce_instance``:
  project_id, instance_id, zone), ``metricKind`` GAUGE, ``valueType`` DOUBLE, ``unit`` and
  ``points`` "in reverse time order" (the Ops Agent metrics page gives the metric types,
  kinds, units and labels). Only series with points in the interval are listed.

The filter is read as a conjunction (``AND``) of ``metric.type``, ``resource.type`` and
``resource.labels.instance_id`` (a string or ``one_of(...)``); any other selector is refused
as INVALID_ARGUMENT rather than ignored. Errors are AIP-193 bodies, as the rest.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from bot.sandbox.controlplane.gpu_traces import NVML, UNITS, instance_id
from bot.sandbox.controlplane.http import STATE, cluster_named, json_body
from bot.sandbox.controlplane.page_tokens import page_size
from bot.sandbox.controlplane.rpc import invalid
from bot.sandbox.controlplane.state import SimulatorState

TIME_SERIES = "/{api:v3}/projects/{project}/timeSeries"
ALIGNERS = ("ALIGN_NONE", "ALIGN_MAX", "ALIGN_MEAN")
_TERM = re.compile(r"^\s*([a-z_.]+)\s*=\s*(.+?)\s*$")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
PAGE_MAX = 100_000  # "If page_size is empty or more than 100,000 results, the effective
# page_size is 100,000 results"


def _filter(text: str) -> tuple[str, str | None, set[str] | None]:
    """The metric type, resource type and instance ids the filter names."""
    if not text.strip():
        raise invalid(
            "Field filter had an invalid value: a filter naming a metric type is required."
        )
    metric = resource = None
    ids: set[str] | None = None
    for term in re.split(r"\s+AND\s+", text.strip()):
        match = _TERM.match(term)
        if match is None:
            raise invalid(f'Field filter had an invalid value of "{text}": cannot parse "{term}".')
        key, value = match.groups()
        literals = _QUOTED.findall(value)
        if (
            value.startswith("one_of(")
            and value.endswith(")")
            and key.startswith("resource.labels.")
        ):
            named = set(literals)
        elif _QUOTED.fullmatch(value):
            named = {literals[0]}
        else:
            raise invalid(f'Field filter had an invalid value of "{text}": cannot parse "{term}".')
        if key == "metric.type":
            if metric is not None or len(named) != 1:
                raise invalid("The filter must specify a single metric type.")
            metric = next(iter(named))
        elif key == "resource.type":
            resource = next(iter(named))
        elif key == "resource.labels.instance_id":
            ids = named if ids is None else ids & named
        else:
            raise invalid(f'Field filter had an invalid value of "{text}": unsupported "{key}".')
    if metric is None:
        raise invalid("The filter must specify a single metric type.")
    return metric, resource, ids


def _time(request: web.Request, key: str, default: float | None = None) -> float:
    text = request.query.get(key)
    if text is None:
        if default is None:
            raise invalid(f"Field {key} is required.")
        return default
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise invalid(f'Field {key} had an invalid value of "{text}".') from None


def _rfc3339(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _gpus(pool: dict[str, Any]) -> int:
    spec = pool.get("machineSpec") or {}
    if spec.get("acceleratorCount"):
        return int(spec["acceleratorCount"])
    found = re.search(r"-(\d+)g$", str(spec.get("machineType", "")))
    return int(found.group(1)) if found else 1


def _points(
    samples: list[tuple[float, float]], aligner: str, period: float, start: float, end: float
) -> list[tuple[float, float]]:
    """Raw samples, or one point per ``period`` ending at ``end`` (its highest or mean)."""
    if aligner == "ALIGN_NONE":
        return samples
    points = []
    at = end
    while at > start:
        inside = [v for t, v in samples if at - period < t <= at]
        if inside:
            points.append(
                (at, max(inside) if aligner == "ALIGN_MAX" else sum(inside) / len(inside))
            )
        at -= period
    return sorted(points)


def _series(state: SimulatorState, project: str, request: web.Request) -> list[dict[str, Any]]:
    metric, resource, ids = _filter(request.query.get("filter", ""))
    end = _time(request, "interval.endTime")
    start = _time(request, "interval.startTime", end)
    aligner = request.query.get("aggregation.perSeriesAligner", "ALIGN_NONE")
    if aligner not in ALIGNERS:
        raise invalid(f"The aligner {aligner} is not supported for this metric.")
    period = 0.0
    if aligner != "ALIGN_NONE":
        text = request.query.get("aggregation.alignmentPeriod", "")
        if not re.fullmatch(r"\d+(\.\d+)?s", text) or float(text[:-1]) < 60:
            raise invalid("The alignment period must be at least 60 seconds.")
        period = float(text[:-1])
    if resource not in (None, "gce_instance") or metric not in UNITS:
        return []
    number = state.project_number(project)
    found = []
    for name in state.gpu.candidates(ids):
        parts = name.split("/")
        if name not in state.clusters or state.project_number(parts[1]) != number:
            continue
        if state.gpu.metric.get(name, NVML) != metric:
            continue
        cluster = state.cluster(name)
        pools = {p["id"]: p for p in cluster.get("nodePools", [])}
        status = (cluster.get("clusterStatus") or {}).get("nodesStatus") or []
        vms = {n["instanceName"]: n for n in status}
        for node, trace in sorted(state.gpu.nodes[name].items()):
            vm = vms.get(node)  # a VM that is gone publishes nothing
            if vm is None or (ids is not None and instance_id(node) not in ids):
                continue
            points = _points(trace.samples(start, end), aligner, period, start, end)
            gpus = _gpus(pools.get(vm.get("nodePoolId"), {})) if points else 0
            found += [_one(metric, parts, node, gpu, points) for gpu in range(gpus)]
    return found


def _one(
    metric: str, parts: list[str], node: str, gpu: int, points: list[tuple[float, float]]
) -> dict[str, Any]:
    """One GPU's series, with the Ops Agent's labels and its points newest first."""
    unit, scale = UNITS[metric]
    return {
        "metric": {
            "type": metric,
            "labels": {
                "gpu_number": str(gpu),
                "model": "NVIDIA H100 80GB HBM3",
                "uuid": f"GPU-{instance_id(node)[:8]}-{gpu:04d}",
            },
        },
        "resource": {
            "type": "gce_instance",
            "labels": {
                "project_id": parts[1],
                "instance_id": instance_id(node),
                "zone": f"{parts[3]}-a",
            },
        },
        "metricKind": "GAUGE",
        "valueType": "DOUBLE",
        "points": [
            {
                "interval": {"startTime": _rfc3339(t), "endTime": _rfc3339(t)},
                "value": {"doubleValue": round(v * scale, 6)},
            }
            for t, v in reversed(points)
        ],
        "unit": unit,
    }


async def list_time_series(request: web.Request) -> web.Response:
    state = request.app[STATE]
    project = request.match_info["project"]
    size = page_size(request.query.get("pageSize", ""), PAGE_MAX)
    series = _series(state, project, request)
    key = f"timeSeries:{project}:{request.query.get('filter', '')}"
    offset = state.decode_page_token(key, request.query.get("pageToken", ""))
    page: list[dict[str, Any]] = []
    points, index = 0, offset
    while index < len(series) and (not page or points + len(series[index]["points"]) <= size):
        page.append(series[index])
        points += len(series[index]["points"])
        index += 1
    reply: dict[str, Any] = {"timeSeries": page} if page else {}
    if page:
        units = {s["unit"] for s in page}
        reply["unit"] = units.pop() if len(units) == 1 else "{not_a_unit}"
    if index < len(series):
        reply["nextPageToken"] = state.encode_page_token(key, index)
    return web.json_response(reply)


async def sim_metrics(request: web.Request) -> web.Response:
    """Set a cluster's nodes' GPU utilisation: ``{"cluster", "nodes": {NODE: PERCENT or
    [[SECONDS_AGO, PERCENT], ...]}, "metric"}`` (a node set to null publishes nothing; the
    metric type defaults to the Ops Agent's NVML one)."""
    state = request.app[STATE]
    if request.method != "POST":
        return web.json_response(state.gpu.shown())
    body = await json_body(request)
    name = cluster_named(state, body)
    return web.json_response(
        {"cluster": name, **state.gpu.publish(name, body, state.wall().timestamp())}
    )


def add_routes(app: web.Application) -> None:
    app.router.add_get(TIME_SERIES, list_time_series)
    app.router.add_route("*", "/_sim/metrics", sim_metrics)
