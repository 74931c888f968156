"""GPU metrics end to end on the whole stack: the simulator serves Cloud Monitoring's
``timeSeries.list`` as Google documents it, the bot reads one metric a cluster from it over
loopback HTTP, and the sweep names an allocation whose GPUs stayed idle, and only that."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.sweep_once import as_json
from bot.vertex.monitoring import GpuMetrics, rfc3339
from handlers.policy import Policy
from handlers.sweep.report import SweepReport
from tests.support.demo_stack import Stack, demo_stack

TRAIN01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/train01"
SIDE01 = "projects/other-project/locations/us-central1/modelDevelopmentClusters/side01"
SERIES = "/vertex/v3/projects/demo-project/timeSeries"
NVML = "agent.googleapis.com/gpu/utilization"
DCGM = "workload.googleapis.com/gpu.dcgm.utilization"
H = 3600
FIVE_MINUTES = Policy.model_validate({"gpu_idle": {"after_minutes": 5}})


async def listed(stack: Stack, **query: str) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": "Bearer test"}
    async with stack.session.get(f"{stack.url}{SERIES}", params=query, headers=headers) as reply:
        return reply.status, await reply.json()


def window(stack: Stack, seconds: float) -> dict[str, str]:
    now = stack.simulator.wall().timestamp()
    return {"interval.startTime": rfc3339(now - seconds), "interval.endTime": rfc3339(now)}


def instance_of(stack: Stack, node: str, cluster: str = TRAIN01) -> str:
    status = stack.simulator.cluster(cluster)["clusterStatus"]["nodesStatus"]
    return str(next(n["instanceId"] for n in status if n["instanceName"] == node))


async def metrics(
    stack: Stack, nodes: dict[str, Any], metric: str | None = None, cluster: str = "train01"
) -> None:
    body: dict[str, Any] = {"cluster": cluster, "nodes": nodes}
    status, _ = await stack.post(
        "/vertex/_sim/metrics", body | ({"metric": metric} if metric else {})
    )
    assert status == 200


async def timeseries_calls(stack: Stack, project: str = "other-project") -> int:
    """The ``timeSeries.list`` calls made in a project (the demo sweeps none in
    other-project, whose side01 is outside its targets)."""
    async with stack.session.get(f"{stack.url}/vertex/_sim/requests") as reply:
        log = (await reply.json())["requests"]
    return sum(1 for r in log if r["path"].endswith(f"/projects/{project}/timeSeries"))


async def test_the_simulator_lists_time_series_as_cloud_monitoring_does(tmp_path: Path) -> None:
    async with demo_stack(tmp_path) as stack:
        await metrics(stack, {"train01-a4-0": 3, "train01-a4-1": [[600, 50], [120, 0]]})
        flt = f'metric.type = "{NVML}" AND resource.type = "gce_instance"'

        async with stack.session.get(f"{stack.url}{SERIES}", params={"filter": flt}) as reply:
            assert reply.status == 401  # no credentials
        status, body = await listed(stack, **window(stack, 900))
        assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT"
        two = f'metric.type = "{NVML}" AND metric.type = "{DCGM}"'
        status, body = await listed(stack, filter=two, **window(stack, 900))
        assert status == 400 and "single metric type" in body["error"]["message"]
        status, body = await listed(stack, filter=flt)
        assert status == 400 and "interval.endTime" in body["error"]["message"]

        status, body = await listed(stack, filter=flt, **window(stack, 900))
        assert status == 200 and body["unit"] == "%"
        series = body["timeSeries"]
        assert len(series) == 16  # two nodes of eight GPUs, a series each
        first = series[0]
        assert first["metricKind"] == "GAUGE" and first["valueType"] == "DOUBLE"
        assert first["resource"]["type"] == "gce_instance"
        assert set(first["resource"]["labels"]) == {"project_id", "instance_id", "zone"}
        assert set(first["metric"]["labels"]) == {"gpu_number", "model", "uuid"}
        ends = [p["interval"]["endTime"] for p in first["points"]]
        assert ends == sorted(ends, reverse=True) and len(ends) == 15  # one a minute
        # the second node published only for its last ten minutes, 0 % for the last two
        a4_1 = instance_of(stack, "train01-a4-1")
        late = next(s for s in series if s["resource"]["labels"]["instance_id"] == a4_1)
        values = [p["value"]["doubleValue"] for p in late["points"]]
        assert len(values) == 10 and values[:2] == [0.0, 0.0] and set(values[2:]) == {50.0}

        # one node named, aligned to its highest value every five minutes
        a4_0 = instance_of(stack, "train01-a4-0")
        named = f'{flt} AND resource.labels.instance_id = one_of("{a4_0}")'
        aligned = {
            "aggregation.alignmentPeriod": "300s",
            "aggregation.perSeriesAligner": "ALIGN_MAX",
        }
        status, body = await listed(stack, filter=named, **aligned, **window(stack, 900))
        assert status == 200 and len(body["timeSeries"]) == 8
        assert [len(s["points"]) for s in body["timeSeries"]] == [3] * 8
        status, body = await listed(
            stack,
            filter=named,
            **window(stack, 900),
            **{"aggregation.perSeriesAligner": "ALIGN_MAX"},
        )
        assert status == 400  # an aligner needs its period

        # pages of at most pageSize points, every series once
        seen, token, pages = [], "", 0
        while True:
            page = {"pageSize": "40"} | ({"pageToken": token} if token else {})
            status, body = await listed(stack, filter=flt, **page, **window(stack, 900))
            assert status == 200
            assert sum(len(s["points"]) for s in body["timeSeries"]) <= 40
            seen += body["timeSeries"]
            pages += 1
            token = body.get("nextPageToken", "")
            if not token:
                break
        assert pages > 1 and len(seen) == 16

        # another metric type: nothing, as a project whose VMs do not publish it
        other = f'metric.type = "{DCGM}"'
        assert await listed(stack, filter=other, **window(stack, 900)) == (200, {})


async def test_the_bot_learns_each_cluster_s_metric_and_then_asks_once(tmp_path: Path) -> None:
    async with demo_stack(tmp_path) as stack:
        ticks = [0.0]
        store = stack.service.store

        def client() -> GpuMetrics:
            url = f"{stack.url}/vertex"
            return GpuMetrics(stack.service.vertex, url, book=store, clock=lambda: ticks[0])

        gpus = client()
        node = {instance_of(stack, "side01-cpu-0", SIDE01): "side01-cpu-0"}
        now = stack.simulator.wall().timestamp()

        async def calls_of(read: Any) -> tuple[Any, int]:
            before = await timeseries_calls(stack)
            use = await read
            return use, await timeseries_calls(stack) - before

        use, calls = await calls_of(gpus.gpu_use(SIDE01, node, 600, now))
        assert use.metric is None and use.nodes == {} and use.problem is None
        assert calls == 3  # DCGM v2, DCGM v1, NVML: none has data

        # none answered: one metric a sweep, in turn, until one does
        await metrics(stack, {"side01-cpu-0": 2}, cluster="side01")
        found = []
        for _ in range(3):
            use, calls = await calls_of(gpus.gpu_use(SIDE01, node, 600, now + 60))
            assert calls == 1
            found.append(use.metric)
        assert found == [None, None, NVML]
        assert set(use.nodes) == {"side01-cpu-0"} and len(use.nodes["side01-cpu-0"].slices) == 1
        assert use.nodes["side01-cpu-0"].peak == 2.0
        use, calls = await calls_of(gpus.gpu_use(SIDE01, node, 600, now + 60))
        assert (use.metric, calls) == (NVML, 1)  # the learned metric, alone
        # kept in the database for the next sweep, in another process or replica
        await gpus.keep()
        use, calls = await calls_of(client().gpu_use(SIDE01, node, 600, now + 60))
        assert (use.metric, calls) == (NVML, 1)

        # an hour on, the better metrics are tried first: DCGM's ratio read as a percentage
        await metrics(stack, {"side01-cpu-0": 40}, metric=DCGM, cluster="side01")
        ticks[0] += 3601
        use, calls = await calls_of(gpus.gpu_use(SIDE01, node, 600, now + 60))
        assert (use.metric, calls) == (DCGM, 1) and use.nodes["side01-cpu-0"].peak == 40.0

        # a refusal is the reading's problem, never an exception: its GPUs count as busy
        denied = {"status": 403, "message": "Permission denied", "count": 1}
        status, _ = await stack.post(
            "/vertex/_sim/faults", {"path": "other-project/timeSeries", **denied}
        )
        assert status == 201
        use, _ = await calls_of(gpus.gpu_use(SIDE01, node, 600, now + 60))
        assert use.metric is None and use.problem is not None and "denied" in use.problem
        # and the project is not asked again for a while: one refusal, not one a cluster
        use, calls = await calls_of(gpus.gpu_use(SIDE01, node, 600, now + 60))
        assert calls == 0 and use.problem is not None and "denied" in use.problem


async def sweep_json(stack: Stack) -> dict[str, Any]:
    report: SweepReport = await stack.wait_for(lambda: stack.service.core.sweeper.sweep(force=True))
    entries = as_json(report, "db")["clusters"]
    return dict(next(e for e in entries if e["cluster"] == TRAIN01))


async def swept_until(stack: Stack, holds: Any, sweeps: int = 4) -> dict[str, Any]:
    """Sweeps until ``holds(entry)``: a cluster whose metric is not known yet is asked one
    metric a sweep, so the one its nodes publish is read within three."""
    for _ in range(sweeps):
        entry = await sweep_json(stack)
        if holds(entry):
            return entry
    raise AssertionError(f"after {sweeps} sweeps: {entry}")


def read(stack: Stack) -> Any:
    gpus = stack.service.core.sweeper.observer.gpus
    assert isinstance(gpus, GpuMetrics)
    return gpus.chosen.get(TRAIN01, (None,))[0]


async def test_an_allocation_idle_for_its_window_is_named_and_nothing_else(tmp_path: Path) -> None:
    async with demo_stack(tmp_path, policy=FIVE_MINUTES) as stack:
        notebook = {
            "job_id": 5100,
            "name": "jupyter",
            "user_name": "alice",
            "account": "research",
            "partition": "a4",
            "job_state": "RUNNING",
            "node_count": 1,
            "started_ago": 3 * H,
        }
        status, _ = await stack.post(
            "/vertex/_sim/jobs", {"cluster": "train01", "jobs": [notebook]}
        )
        assert status == 200

        # no GPU metrics at all (the demo's GPUs at work stop publishing): counted busy, and
        # the report says why it cannot tell
        await metrics(stack, {"train01-a4-0": None})
        entry = await sweep_json(stack)
        assert entry["status"] == "busy" and entry["idle_allocations"] == []
        report = await stack.service.core.sweeper.latest()
        assert report is not None
        shown = next(e for e in report.entries if e.cluster == TRAIN01)
        assert any("GPU use unknown on train01-a4-0" in " ".join(n) for n in shown.notes)

        # GPUs at 80 %, read once the metric is found: busy
        await metrics(stack, {"train01-a4-0": [[2 * H, 80]]})
        entry = await swept_until(stack, lambda e: read(stack) == 2)
        assert entry["status"] == "busy" and entry["idle_allocations"] == []

        # at 1 % for the last hour: the notebook holds eight idle GPUs, and is no demand
        await metrics(stack, {"train01-a4-0": [[2 * H, 80], [H, 1]]})
        entry = await sweep_json(stack)
        [held] = entry["idle_allocations"]
        assert (held["job_id"], held["user"], held["nodes"], held["gpus"]) == (
            5100,
            "alice",
            ["train01-a4-0"],
            8,
        )
        assert held["utilization"] == 1.0 and held["idle_for_s"] >= 300
        assert entry["status"] != "busy"
        assert entry["reason"].startswith("only 1 job holding idle GPUs")

        # its node's metrics stop: never idle from silence
        await metrics(stack, {"train01-a4-0": None})
        entry = await sweep_json(stack)
        assert entry["status"] == "busy" and entry["idle_allocations"] == []
