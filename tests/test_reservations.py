"""Slurm's reservations as the idle rules and the simulator take them: a job waiting for a
reservation that begins tomorrow is not demand today, a maintenance window is planned (not
broken, not demand) and priced until its end, and the simulator serves reservations, node
flags and job reasons as slurmrestd and slurmctld do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.vertex.client import VertexClient
from bot.vertex.slurm import SlurmReader, read_job
from handlers.costs import PriceBook
from handlers.domain.operations import SlurmJob, SlurmReservation
from handlers.slurm.hostlist import expand
from handlers.sweep.demand import Stall, queue_demand
from handlers.sweep.observe import ActivityObserver, Swept
from tests.conftest import Simulator

CPU01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/cpu01"
TRAIN01 = "projects/demo-project/locations/us-central1/modelDevelopmentClusters/train01"
CAPTURES = Path(__file__).parent / "fixtures" / "slurmrestd"
NOW = 1_790_000_000.0
H = 3600.0


def _waiting(reservation: str, user: str = "dana") -> SlurmJob:
    job = read_job(
        {
            "job_id": 7,
            "user_name": user,
            "job_state": ["PENDING"],
            "state_reason": "Reservation",
            "resv_name": reservation,
            "submit_time": {"number": int(NOW - H)},
            "eligible_time": int(NOW - H),
        }
    )
    assert job is not None and job.reservation == reservation
    return job


def test_a_job_waiting_for_a_reservation_that_begins_tomorrow_is_not_demand() -> None:
    demand = queue_demand([_waiting("big-run")], NOW, 2 * H, {"big-run": NOW + 20 * H})
    assert not demand.active
    [group] = demand.stalled
    assert group.kind == Stall.LATER
    assert group.words() == (
        "1 job of dana waiting for its reservation big-run, which starts "
        "2026-09-22 10:13 UTC (Reservation)",
    )


def test_a_reservation_within_idle_after_is_demand() -> None:
    assert queue_demand([_waiting("big-run")], NOW, 2 * H, {"big-run": NOW + H}).pending == 1
    assert queue_demand([_waiting("big-run")], NOW, 2 * H, {"big-run": NOW - H}).pending == 1


def test_a_reservation_slurm_does_not_list_is_not_demand_and_says_so() -> None:
    [group] = queue_demand([_waiting("gone")], NOW, 2 * H, {"other": NOW}).stalled
    assert group.kind == Stall.OTHER and "its reservation gone is not listed" in group.words()[0]
    # reservations not read: Slurm's reason alone, which is not on the allow-list either
    [unread] = queue_demand([_waiting("gone")], NOW, 2 * H).stalled
    assert unread.kind == Stall.OTHER and "it waits for its reservation" in unread.words()[0]


def test_host_lists_expand_as_scontrol_does_and_are_bounded() -> None:
    assert expand("cpu01-cpu-[0-2,5]") == [f"cpu01-cpu-{i}" for i in (0, 1, 2, 5)]
    assert expand("rack[1-2]-n[01-02],login0") == [
        "rack1-n01",
        "rack1-n02",
        "rack2-n01",
        "rack2-n02",
        "login0",
    ]
    assert expand("a[0-99999999999]b[0-99999999999]", limit=1000)[-1] == "a0b999"
    assert len(expand("a[0-99999999999]", limit=1000)) == 1000
    assert expand("odd[x-y]") == ["odd[x-y]"]  # not a range Slurm writes: kept as written


def test_a_reservation_document_is_read() -> None:
    from bot.vertex.slurm import read_reservation

    found = read_reservation(
        {
            "name": "maint",
            "start_time": {"set": True, "infinite": False, "number": 100},
            "end_time": {"set": True, "infinite": False, "number": 200},
            "node_list": "cpu01-cpu-[0-1]",
            "flags": ["MAINT", "SPEC_NODES"],
            "node_count": 2,
        }
    )
    assert isinstance(found, SlurmReservation)
    assert found.maintenance and found.active(150) and not found.active(200)
    assert (found.start, found.end, found.nodes) == (100, 200, "cpu01-cpu-[0-1]")


async def _maintenance(simulator: Simulator, nodes: str, hours: int = 10) -> None:
    window = {"name": "maint-dec", "start_time": "now-1h", "end_time": f"now+{hours}h"}
    body = {"cluster": "cpu01", "reservations": [window | {"node_list": nodes, "flags": "MAINT"}]}
    await simulator.admin("POST", "reservations", body)


async def _proxied(client: VertexClient, cluster: str, resource: str) -> dict[str, Any]:
    reader = SlurmReader(vertex=client)
    return dict(await reader.get(cluster, resource, {}))


async def test_the_simulator_serves_a_maintenance_window_as_slurm_does(
    simulator: Simulator, client: VertexClient
) -> None:
    await _maintenance(simulator, "cpu01-cpu-[0-2]")
    job = {"job_state": "PENDING", "partition": "cpu", "node_count": 1}
    await simulator.admin("POST", "jobs", {"cluster": "cpu01", "jobs": [job]})
    reservations = (await _proxied(client, CPU01, "reservations/"))["reservations"]
    assert [(r["name"], r["flags"], r["node_count"]) for r in reservations] == [
        ("maint-dec", ["MAINT"], 3)
    ]
    nodes = {n["name"]: n["state"] for n in (await _proxied(client, CPU01, "nodes/"))["nodes"]}
    assert nodes["cpu01-cpu-0"] == ["IDLE", "RESERVED", "MAINTENANCE"]
    assert "MAINTENANCE" not in nodes["cpu01-cpu-3"]  # drained, and outside the window
    [job] = (await _proxied(client, CPU01, "jobs/"))["jobs"]
    # slurmctld: the one node left is drained, the rest reserved for maintenance
    assert job["state_reason"] == "ReqNodeNotAvail"
    assert "Reserved for maintenance" in job["state_description"]


async def test_a_job_for_a_reservation_not_begun_waits_and_grows_no_pool(
    simulator: Simulator, client: VertexClient
) -> None:
    cluster = simulator.state.clusters[TRAIN01]
    pool = next(p for p in cluster["nodePools"] if p["id"] == "a4")
    pool["scalingSpec"] = {"minNodeCount": 0, "maxNodeCount": 4}
    later = {"name": "big-run", "start_time": "now+20h", "end_time": "now+30h"}
    later["node_list"] = "train01-a4-[0-3]"
    await simulator.admin("POST", "reservations", {"cluster": "train01", "reservations": [later]})
    job = {"job_state": "PENDING", "partition": "a4", "node_count": 4, "reservation": "big-run"}
    await simulator.admin("POST", "jobs", {"cluster": "train01", "jobs": [job]})
    [seen] = (await _proxied(client, TRAIN01, "jobs/"))["jobs"]
    assert (seen["state_reason"], seen["resv_name"]) == ("Reservation", "big-run")
    assert simulator.state.pool_size(cluster, pool) == 0  # nothing Slurm would start now
    now = {"name": "big-run", "start_time": "now-1m", "end_time": "now+10h"}
    body = {"cluster": "train01", "reservations": [now | {"node_list": "train01-a4-[0-3]"}]}
    await simulator.admin("POST", "reservations", body)
    assert simulator.state.pool_size(cluster, pool) == 4  # its reservation began: it runs


async def test_bad_reservations_are_refused_with_a_reason(simulator: Simulator) -> None:
    url = f"{simulator.url}/_sim/reservations"
    before = await simulator.admin("GET", "reservations")
    bad = [
        {"name": "r", "start_time": "now+2h", "end_time": "now+1h"},
        {"name": "r", "flags": ["SOMETIMES"]},
        {"name": "r", "start_time": "tomorrow"},
        {"name": "r", "colour": "blue"},
        {"start_time": "now"},
    ]
    for item in bad:
        body = {"cluster": "cpu01", "reservations": [item]}
        async with simulator.session.post(url, json=body) as reply:
            assert reply.status == 400, item
            assert (await reply.json())["error"]["message"]
    assert await simulator.admin("GET", "reservations") == before  # nothing was kept


def _observer(client: VertexClient, simulator: Simulator) -> ActivityObserver:
    clock = simulator.clock.wall().timestamp
    return ActivityObserver(SlurmReader(vertex=client), lambda: clock(), 4, 2 * H)


async def test_a_maintenance_window_is_planned_and_priced_until_its_end(
    simulator: Simulator, client: VertexClient
) -> None:
    await _maintenance(simulator, "cpu01-cpu-[0-2]", hours=10)
    swept = Swept.of(await client.get_cluster(CPU01), PriceBook.with_overrides())
    seen = await _observer(client, simulator).observe(swept, set())
    assert seen.busy_reason() is None  # not demand
    assert seen.health is not None
    assert [n.name for n in seen.health.nodes] == ["cpu01-cpu-3"]  # only the ECC error
    [note] = [n for n in seen.node_notes if "maintenance" in n[0]]
    # three n2-standard-8 nodes at $0.388 an hour, 10 hours of the window left
    assert note == (
        "3 nodes reserved for maintenance until 2026-11-30 19:00 UTC (reservation "
        "maint-dec), paid for and running nothing: the rest of the window costs ~$11.64",
    )


async def test_reservations_are_read_only_when_a_sweep_needs_them(
    simulator: Simulator, client: VertexClient
) -> None:
    observer = _observer(client, simulator)
    prices = PriceBook.with_overrides()
    held = {"job_state": "PENDING", "hold": True}  # no job waits for a reservation
    await simulator.admin("POST", "jobs", {"cluster": "cpu01", "jobs": [held]})
    await simulator.admin("POST", "reservations", {"cluster": "cpu01", "reservations": []})
    await observer.observe(Swept.of(await client.get_cluster(CPU01), prices), set())
    assert not [p for p in await _paths(simulator) if p.endswith("/reservations/")]
    await _maintenance(simulator, "cpu01-cpu-0")
    await observer.observe(Swept.of(await client.get_cluster(CPU01), prices), set())
    assert [p for p in await _paths(simulator) if p.endswith("/reservations/")]


async def _paths(simulator: Simulator) -> list[str]:
    return [str(r["body"]["path"]) for r in await simulator.requests(path=":callSlurmRestApi")]


async def test_the_reservations_route_lists_what_is_set(simulator: Simulator) -> None:
    await _maintenance(simulator, "cpu01-cpu-[0-1]")
    held = await simulator.admin("GET", "reservations")
    [window] = held[CPU01]
    assert window["flags"] == ["MAINT"] and window["node_list"] == "cpu01-cpu-[0-1]"
    assert window["end_time"] - window["start_time"] == 11 * 3600


async def test_a_reason_slurmctld_sets_itself_is_set_by_slurm(
    simulator: Simulator, client: VertexClient
) -> None:
    """set_node_reason gives slurmctld's own reasons reason_uid = SlurmUser; an
    administrator's (scontrol update) is theirs: root when nobody said who."""
    nodes = {
        "cpu01-cpu-0": {"state": ["DOWN"], "reason": "Not responding"},
        "cpu01-cpu-1": {"state": ["IDLE", "DRAIN"], "reason": "Kill task failed"},
    }
    await simulator.admin("POST", "nodes", {"cluster": "cpu01", "nodes": nodes})
    listed = (await _proxied(client, CPU01, "nodes/"))["nodes"]
    by = {n["name"]: n["reason_set_by_user"] for n in listed}
    assert by["cpu01-cpu-0"] == by["cpu01-cpu-1"] == "slurm"
    assert by["cpu01-cpu-3"] == "root"  # the demo's "ECC memory error", an admin's drain
    assert by["cpu01-cpu-2"] == ""  # no reason, nobody


async def test_partitions_diag_and_one_node_are_served_as_slurmrestd_does(
    simulator: Simulator, client: VertexClient
) -> None:
    [partition] = (await _proxied(client, CPU01, "partitions/"))["partitions"]
    captured = json.loads(json.loads((CAPTURES / "lcrownover_23.11_v0.0.40_partitions.json")
                                     .read_text())["body"])["partitions"][0]  # fmt: skip
    assert set(partition) == set(captured)  # every field of the real reply
    assert partition["name"] == "cpu" and partition["partition"]["state"] == ["UP"]
    assert partition["nodes"]["configured"] == "cpu01-cpu-[0-3]"
    assert partition["nodes"]["total"] == 4
    statistics = (await _proxied(client, CPU01, "diag/"))["statistics"]
    real = json.loads(json.loads((CAPTURES / "lcrownover_23.11_v0.0.40_diag.json")
                                 .read_text())["body"])["statistics"]  # fmt: skip
    assert set(statistics) == set(real)
    assert (statistics["jobs_pending"], statistics["jobs_running"]) == (2, 0)  # the demo's
    assert statistics["req_time"]["number"] == int(simulator.clock.wall().timestamp())
    [node] = (await _proxied(client, CPU01, "node/cpu01-cpu-3/"))["nodes"]
    assert node["name"] == "cpu01-cpu-3" and node["reason"] == "ECC memory error"
    reader = SlurmReader(vertex=client)
    reply = await reader.get(CPU01, "node/nope/", {})
    assert "nodes" not in reply
    assert reply["errors"][0]["description"] == "Failure to query node nope"


async def test_slurm_23_11_is_served_and_read(simulator: Simulator, client: VertexClient) -> None:
    """Slurm 23.11 ships data parsers v0.0.38 to v0.0.40; the reader finds v0.0.40 (newest
    first), whose JOB_INFO has no ``hold``: a held job is read as held by its reason."""
    await simulator.admin("POST", "slurm", {"cluster": "cpu01", "release": "23.11"})
    reader = SlurmReader(vertex=client)
    jobs = await reader.jobs(CPU01)
    paths = [r["body"]["path"] for r in await simulator.requests(path=":callSlurmRestApi")]
    assert paths[-1] == "/slurm/v0.0.40/jobs/" and "/slurm/v0.0.41/jobs/" in paths
    raw = await _proxied(client, CPU01, "jobs/")
    assert raw["meta"]["slurm"]["release"] == "23.11.1"
    assert all("hold" not in job for job in raw["jobs"])
    held = next(j for j in jobs if j.job_id == 3120)
    demand = queue_demand(jobs, simulator.clock.wall().timestamp(), 2 * H)
    assert held.reason == "JobHeldUser" and not demand.active
    assert [n.name for n in await reader.nodes(CPU01)][:1] == ["cpu01-cpu-0"]


async def test_every_node_state_of_the_newest_data_parser_may_be_set(
    simulator: Simulator, client: VertexClient
) -> None:
    newest = ["IDLE", "BLOCKED", "POWER_DRAIN", "REBOOT_CANCELED", "UNDRAIN", "EXTERNAL"]
    nodes = {"cpu01-cpu-0": {"state": newest, "reason": ""}}
    await simulator.admin("POST", "nodes", {"cluster": "cpu01", "nodes": nodes})
    listed = (await _proxied(client, CPU01, "nodes/"))["nodes"]
    assert next(n for n in listed if n["name"] == "cpu01-cpu-0")["state"] == newest
    async with simulator.session.post(
        f"{simulator.url}/_sim/nodes",
        json={"cluster": "cpu01", "nodes": {"cpu01-cpu-0": {"state": ["IDLE", "SLEEPY"]}}},
    ) as reply:
        assert reply.status == 400 and "SLEEPY" in (await reply.json())["error"]["message"]


async def test_a_job_short_of_nodes_waits_in_the_main_schedulers_words(
    simulator: Simulator, client: VertexClient
) -> None:
    """No required nodes, more nodes than the partition has in service: Resources with
    job_scheduler.c's words, which the bot reads as blocked, not demand."""
    job = {"job_state": "PENDING", "partition": "cpu", "node_count": 4, "user_name": "dana"}
    await simulator.admin("POST", "jobs", {"cluster": "cpu01", "jobs": [job]})
    [seen] = (await _proxied(client, CPU01, "jobs/"))["jobs"]
    assert seen["state_reason"] == "Resources"
    assert seen["state_description"].startswith("Nodes required for job are DOWN, DRAINED")
    jobs = await SlurmReader(vertex=client).jobs(CPU01)
    demand = queue_demand(jobs, simulator.clock.wall().timestamp(), 2 * H)
    assert not demand.active and demand.stalled[0].kind == Stall.BLOCKED


async def test_the_short_job_form_carries_slurms_words(
    simulator: Simulator, client: VertexClient
) -> None:
    said = "Nodes required for job are DOWN, DRAINED, REBOOTING or reserved for jobs"
    job = {"job_state": "PENDING", "state_reason": "Resources", "state_description": said}
    await simulator.admin("POST", "jobs", {"cluster": "cpu01", "jobs": [job]})
    [seen] = (await _proxied(client, CPU01, "jobs/"))["jobs"]
    assert (seen["state_reason"], seen["state_description"]) == ("Resources", said)


async def test_fair_share_is_written_as_each_data_parser_writes_it(
    simulator: Simulator, client: VertexClient
) -> None:
    """An association with no usage has an infinite level: a bare Infinity up to v0.0.41
    (Slurm 23.11 and 24.05), FLOAT64_NO_VAL's infinite form since; the reader takes both."""
    reader = SlurmReader(vertex=client)
    for release, version in (("24.05", "v0.0.41"), ("25.11", "v0.0.44")):
        await simulator.admin("POST", "slurm", {"cluster": "cpu01", "release": release})
        reply = await client.call_slurm_rest_api(CPU01, f"/slurm/{version}/shares")
        text = reply.body
        rows = json.loads(text)["shares"]["shares"]
        level = rows[0]["fairshare"]["level"]
        if version == "v0.0.41":
            assert '"level": Infinity' in text and level == float("inf")
        else:
            assert level == {"set": False, "infinite": True, "number": 0.0}
        shares = await reader.shares(CPU01)
        assert shares and all(s.fairshare is not None for s in shares)


async def test_an_arrays_pending_tasks_are_one_meta_record_counted_as_squeue_does(
    simulator: Simulator, client: VertexClient
) -> None:
    job = {"job_id": 7725337, "job_state": "PENDING", "array": "412-9999", "partition": "cpu"}
    await simulator.admin("POST", "jobs", {"cluster": "cpu01", "jobs": [job]})
    [seen] = (await _proxied(client, CPU01, "jobs/"))["jobs"]
    assert seen["array_task_string"] == "412-9999"
    assert seen["array_job_id"]["number"] == 7725337 and not seen["array_task_id"]["set"]
    [read] = await SlurmReader(vertex=client).jobs(CPU01)
    assert read.tasks == 9588


async def test_power_saving_boots_a_vm_for_a_job_and_suspends_it_after_its_idle_time(
    simulator: Simulator, client: VertexClient
) -> None:
    """power_save.html on the simulator's clock: a job resumes a powered-down cloud node
    (POWERING_UP, the job CONFIGURING) for the boot time; once the job is gone the node is
    IDLE and its VM paid for until SuspendTime has passed, then powered down, VM gone."""
    cluster = simulator.state.clusters[TRAIN01]
    pool = next(p for p in cluster["nodePools"] if p["id"] == "a4")
    pool["scalingSpec"] = {"minNodeCount": 0, "maxNodeCount": 4}
    switches = {"cluster": "train01", "boot_seconds": 180, "suspend_time": 600}
    await simulator.admin("POST", "slurm", switches)
    await simulator.admin("POST", "jobs", {"cluster": "train01", "jobs": []})
    simulator.clock.advance(601)  # the two VMs it had idle past SuspendTime: gone

    async def seen() -> tuple[int, dict[str, list[str]], list[list[str]]]:
        vms = (await client.get_cluster(TRAIN01)).nodes(
            next(p for p in (await client.get_cluster(TRAIN01)).node_pools if p.id == "a4")
        )
        nodes = {
            n["name"]: n["state"] for n in (await _proxied(client, TRAIN01, "nodes/"))["nodes"]
        }
        jobs = [j["job_state"] for j in (await _proxied(client, TRAIN01, "jobs/"))["jobs"]]
        return vms, nodes, jobs

    vms, nodes, _ = await seen()
    assert vms == 0 and nodes["train01-a4-0"] == ["IDLE", "CLOUD", "POWERED_DOWN"]
    job = {"job_state": "RUNNING", "partition": "a4", "node_count": 1}
    await simulator.admin("POST", "jobs", {"cluster": "train01", "jobs": [job]})
    vms, nodes, jobs = await seen()
    assert vms == 1 and nodes["train01-a4-0"] == ["ALLOCATED", "CLOUD", "POWERING_UP"]
    assert jobs == [["RUNNING", "CONFIGURING"]]
    simulator.clock.advance(181)  # booted
    vms, nodes, jobs = await seen()
    assert nodes["train01-a4-0"] == ["ALLOCATED", "CLOUD"] and jobs == [["RUNNING"]]
    await simulator.admin("POST", "jobs", {"cluster": "train01", "jobs": []})
    simulator.clock.advance(300)  # idle, within SuspendTime: still a VM, paid for
    vms, nodes, _ = await seen()
    assert vms == 1 and nodes["train01-a4-0"] == ["IDLE", "CLOUD"]
    simulator.clock.advance(301)
    vms, nodes, _ = await seen()
    assert vms == 0 and nodes["train01-a4-0"] == ["IDLE", "CLOUD", "POWERED_DOWN"]
