"""The store on SQLite and on PostgreSQL (migrations), and its contract (atomic transitions,
leases, audit, idle records) held alike by them and by the in-memory ports."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest
import sqlalchemy as sa
from alembic import command

from bot.store import IdleRecords, OpenRequestExistsError, Store, StoreKeeper
from bot.store.migrate import SCRIPTS, _config, current_revision, differences, head
from bot.store.store import SQLITE_CACHE_KB
from handlers.changes.plan import ChangePlan
from handlers.changes.resize import ResizeDetail
from handlers.entities import (
    ApprovalRequest,
    AuditEntry,
    Origin,
    RequestState,
    Submission,
    TrackedOperation,
)
from handlers.health.episodes import HEALTH_RECORD, Episode, HealthRecord
from handlers.owed.model import Owed
from handlers.spend.runs import SPEND_RECORD, OpenRun, SpendRecord, SpendRun
from handlers.sweep.rules import IdleRecord, Run
from tests.conftest import require
from tests.fixtures import schema_v2, schema_v3
from tests.support.memory import MemoryIdleRecords, MemoryKeeper, MemoryStore
from tests.support.postgres import postgres_available

POSTGRES = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"
Rows = Store | MemoryStore


@asynccontextmanager
async def open_store(kind: str, tmp_path: Path) -> AsyncIterator[Store]:
    if kind == "sqlite":
        store = Store.from_url(f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}")
        await store.migrate()
        yield store
        await store.close()
        return
    require(await postgres_available(), "PostgreSQL on 127.0.0.1:5432")
    schema = f"t_{secrets.token_hex(6)}"
    admin = Store.from_url(POSTGRES)
    async with admin.engine.begin() as connection:
        await connection.execute(sa.text(f"CREATE SCHEMA {schema}"))
    store = Store.from_url(POSTGRES, connect_args={"server_settings": {"search_path": schema}})
    await store.migrate()
    yield store
    await store.close()
    async with admin.engine.begin() as connection:
        await connection.execute(sa.text(f"DROP SCHEMA {schema} CASCADE"))
    await admin.close()


DATABASES = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


def tracked(
    name: str, request_id: str, *, started_at: float, next_poll_at: float
) -> TrackedOperation:
    """An operation followed in channel C of cluster c, as the tracker records one."""
    return TrackedOperation(
        name=name,
        request_id=request_id,
        cluster="c",
        channel="C",
        thread=None,
        started_at=started_at,
        next_poll_at=next_poll_at,
    )


@pytest.fixture(params=DATABASES)
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """A real database: SQLite, and PostgreSQL."""
    async with open_store(request.param, tmp_path) as store:
        yield store


STORES = ["memory", *DATABASES]


@asynccontextmanager
async def rows_of(kind: str, tmp_path: Path) -> AsyncIterator[Rows]:
    """The in-memory ports the unit tests use, or a real database."""
    if kind == "memory":
        yield MemoryStore()
        return
    async with open_store(kind, tmp_path) as real:
        yield real


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Rows]:
    """The store's contract, held by the in-memory ports the unit tests use as well."""
    async with rows_of(request.param, tmp_path) as rows:
        yield rows


def idle_records(store: Rows) -> MemoryIdleRecords | IdleRecords:
    return MemoryIdleRecords() if isinstance(store, MemoryStore) else IdleRecords(store)


def a_request(request_id: str = "r1", expires_at: float = 2000.0) -> ApprovalRequest:
    plan = ChangePlan(
        detail=ResizeDetail(),
        cluster="projects/p/locations/r/modelDevelopmentClusters/c1",
        update_mask=("node_pools",),
        fingerprint="abc",
    )
    return ApprovalRequest(
        id=request_id,
        plan=plan,
        requester="U1",
        channel="C1",
        created_at=1000.0,
        expires_at=expires_at,
    )


HEAD = "0017"  # the newest migration; test_cli reads it too


async def test_migrate_is_idempotent(database: Store) -> None:
    assert await database.migrate() == HEAD
    assert await database.migrate() == HEAD
    assert await database.ping()


async def test_sqlite_connections_are_kept_with_small_caches(tmp_path: Path) -> None:
    """On SQLite the connections a replica uses at once are kept, up to the pool's size
    (each is a thread: not started and stopped per use), each with a small page cache."""
    store = Store.from_url(f"sqlite+aiosqlite:///{tmp_path / 'kept.db'}")
    try:
        await store.migrate()
        held = [await store.engine.connect() for _ in range(12)]
        for connection in held:
            size = (await connection.execute(sa.text("PRAGMA cache_size"))).scalar()
            assert size == -SQLITE_CACHE_KB
        for connection in held:
            await connection.close()
        assert store.engine.pool.checkedin() == 12  # type: ignore[attr-defined]
    finally:
        await store.close()


def test_the_newest_revision_is_read_from_the_files_as_alembic_reads_it() -> None:
    """A database at the newest revision is told so without loading Alembic: the revision
    the file names give is the one Alembic's scripts end with."""
    from alembic.script import ScriptDirectory

    assert head() == HEAD == ScriptDirectory(str(SCRIPTS)).get_current_head()


async def test_a_database_behind_is_migrated_at_start(database: Store) -> None:
    """A database stamped with an earlier revision is brought to the newest one."""
    await database.migrate()
    async with database.engine.begin() as connection:
        await connection.run_sync(lambda sync: command.downgrade(_config(sync), "0016"))
    assert await database.migrate() == HEAD
    async with database.engine.connect() as connection:
        assert await connection.run_sync(current_revision) == HEAD


async def test_the_migrations_build_exactly_the_schema_the_code_uses(database: Store) -> None:
    async with database.engine.connect() as connection:
        assert await connection.run_sync(differences) == []
        assert await connection.run_sync(current_revision) == HEAD


async def test_request_round_trip(store: Rows) -> None:
    await store.add_request(a_request())
    loaded = await store.get_request("r1")
    assert loaded == a_request()
    assert await store.get_request("nope") is None


async def test_many_requests_are_read_together(store: Rows) -> None:
    def numbered(n: int) -> ApprovalRequest:  # one open request a cluster
        request = a_request(f"r{n}")
        cluster = f"projects/p/locations/r/modelDevelopmentClusters/c{n}"
        return dataclasses.replace(
            request, plan=request.plan.model_copy(update={"cluster": cluster})
        )

    ids = [f"r{n}" for n in range(1, 1201)]  # more than one chunk of 500
    for n in range(1, 1201):
        await store.add_request(numbered(n))
    asked = [*ids[::-1], "r7", "nope"]  # repeated and missing ids too
    found = await store.get_requests(asked)
    assert set(found) == set(ids)
    assert found["r7"] == numbered(7) and found["r1200"] == numbered(1200)
    assert await store.get_requests([]) == {}


async def test_exactly_one_of_fifty_concurrent_transitions_wins(store: Rows) -> None:
    await store.add_request(a_request())
    results = await asyncio.gather(
        *(
            store.transition(
                "r1", [RequestState.PENDING], RequestState.APPROVED, decided_by=f"U{n}"
            )
            for n in range(50)
        )
    )
    assert results.count(True) == 1
    loaded = await store.get_request("r1")
    assert loaded is not None and loaded.state == RequestState.APPROVED
    assert loaded.decided_by == f"U{results.index(True)}"


async def test_expired_and_open_requests(store: Rows) -> None:
    await store.add_request(a_request("r1", expires_at=1500.0))
    assert [r.id for r in await store.expired_requests(2000.0)] == ["r1"]
    assert {r.id for r in await store.open_requests(a_request().cluster)} == {"r1"}
    with pytest.raises(OpenRequestExistsError):  # one request under way per cluster
        await store.add_request(a_request("r2", expires_at=2500.0))
    await store.transition("r1", [RequestState.PENDING], RequestState.EXPIRED)
    await store.add_request(a_request("r2", expires_at=2500.0))
    assert [r.id for r in await store.open_requests(a_request().cluster)] == ["r2"]


async def test_one_of_twenty_concurrent_requests_for_a_cluster_is_kept(store: Rows) -> None:
    async def ask(n: int) -> bool:
        try:
            await store.add_request(a_request(f"r{n}"))
        except OpenRequestExistsError:
            return False
        return True

    results = await asyncio.gather(*(ask(n) for n in range(20)))
    assert results.count(True) == 1
    assert len(await store.open_requests(a_request().cluster)) == 1


async def test_an_approval_owes_its_change_in_the_same_step(store: Rows) -> None:
    await store.add_request(a_request("r1"))

    def change(n: int) -> Owed:
        return Owed("change:r1", "change", {"request": "r1", "by": n}, 110.0, 110.0)

    moved = await asyncio.gather(
        *(
            store.transition("r1", [RequestState.PENDING], RequestState.APPROVED, owe=[change(n)])
            for n in range(8)
        )
    )
    assert moved.count(True) == 1
    [owed] = await store.owed_items()
    assert owed.key == "change:r1" and owed.subject["by"] == moved.index(True)
    # a move that does not happen owes nothing
    other = Owed("change:other", "change", {"request": "r1"}, 110.0, 110.0)
    assert not await store.transition(
        "r1", [RequestState.PENDING], RequestState.APPROVED, owe=[other]
    )
    assert await store.get_owed("change:other") is None


async def test_start_following_records_the_operation_and_owes_it_with_the_transition(
    store: Rows,
) -> None:
    await store.add_request(a_request("r1"))
    await store.transition("r1", [RequestState.PENDING], RequestState.EXECUTING)
    operation = tracked("op-1", "r1", started_at=1.0, next_poll_at=2.0)
    follow = Owed("follow:r1", "follow", {"operation": "op-1"}, 2.0, 1.0)
    assert await store.start_following("r1", operation, owe=[follow])
    again = Owed("follow:r1-again", "follow", {"operation": "op-1"}, 2.0, 1.0)
    assert not await store.start_following("r1", operation, owe=[again])  # once
    loaded = await store.get_request("r1")
    assert loaded is not None and loaded.state == RequestState.RUNNING
    assert loaded.operation == "op-1" and await store.get_operation("op-1") is not None
    # its following is owed with the move, and only with a move that happened
    owed = await store.get_owed("follow:r1")
    assert owed is not None and (owed.kind, owed.due_at) == ("follow", 2.0)
    assert await store.get_owed("follow:r1-again") is None


async def test_named_lease_one_sweep_per_interval(store: Rows) -> None:
    takes = await asyncio.gather(
        *(store.take_lease("idle-sweep", f"r{n}", 100.0, 60.0, 900.0) for n in range(6))
    )
    assert takes.count(True) == 1
    holder = f"r{takes.index(True)}"
    await store.finish_lease("idle-sweep", holder, 110.0)
    assert not await store.take_lease("idle-sweep", "other", 500.0, 60.0, 900.0)  # too soon
    assert await store.take_lease("idle-sweep", "other", 500.0, 60.0, 0.0)  # forced
    assert not await store.take_lease("idle-sweep", holder, 501.0, 60.0, 0.0)  # held
    assert await store.take_lease("idle-sweep", holder, 561.0, 60.0, 0.0)  # lapsed


async def test_audit_log_newest_first(store: Rows) -> None:
    for n in range(5):
        await store.audit(
            AuditEntry(at=float(n), actor="U1", action=f"a{n}", cluster="c" if n % 2 else "d")
        )
    assert [e.action for e in await store.audit_log(limit=3)] == ["a4", "a3", "a2"]
    assert [e.action for e in await store.audit_log(cluster="c")] == ["a3", "a1"]


async def test_idle_records_compare_and_set(store: Rows) -> None:
    records = idle_records(store)
    record, version = await records.get("c1")
    assert version == 0 and record == IdleRecord(cluster="c1")
    first = IdleRecord(cluster="c1", idle_since=5.0, history=(Run(1.0, 5.0, True),))
    results = await asyncio.gather(*(records.put("c1", first, 0, 10.0) for _ in range(5)))
    assert results.count(True) == 1  # one creation wins
    loaded, version = await records.get("c1")
    assert loaded == first and version == 1
    assert await records.put("c1", IdleRecord(cluster="c1", kept_by="U1"), 1, 11.0)
    assert not await records.put("c1", IdleRecord(cluster="c1", snoozed_by="U2"), 1, 12.0)
    assert (await records.get("c1"))[0].kept_by == "U1"
    assert [cluster for cluster, _ in await records.all()] == ["c1"]
    await records.delete("c1")
    assert await records.all() == []


async def test_stored_names_stay_what_an_earlier_release_reads(database: Store) -> None:
    """The code's names for message ids changed (``card_message``, ``alert_message``); the
    columns and the idle record's keys did not, so replicas of an earlier release, still
    running during a rolling upgrade, read and write the same rows."""
    request = a_request()
    request.card_message = "1700000000.000100"
    await database.add_request(request)
    records = IdleRecords(database)
    posted = IdleRecord(cluster="c1", alert_message="1.2", alert_channel="C1")
    await records.put("c1", posted, 0, 1.0)
    async with database.engine.connect() as connection:
        card = await connection.scalar(sa.text("SELECT card_ts FROM approval_requests"))
        document = await connection.scalar(sa.text("SELECT record FROM idle_records"))
    assert card == "1700000000.000100" and json.loads(document)["alert_ts"] == "1.2"
    async with database.engine.begin() as connection:  # as the earlier release writes it
        old = json.dumps({"cluster": "c1", "alert_ts": "3.4", "alert_channel": "C1"})
        await connection.execute(sa.text("UPDATE idle_records SET record = :r"), {"r": old})
    assert (await records.get("c1"))[0].alert_message == "3.4"


async def test_idle_records_saved_in_bulk_lose_only_the_raced_rows(store: Rows) -> None:
    records = idle_records(store)
    assert await records.put("b", IdleRecord(cluster="b", kept_by="U1"), 0, 1.0)
    found = await records.get_many(["a", "b", "c"])
    assert {k: v[1] for k, v in found.items()} == {"a": 0, "b": 1, "c": 0}
    # "c" is created by someone else between the read and the bulk write
    assert await records.put("c", IdleRecord(cluster="c", snoozed_by="U2"), 0, 2.0)
    lost = await records.put_many(
        [
            (name, IdleRecord(cluster=name, idle_since=5.0), version)
            for name, (_, version) in found.items()
        ],
        3.0,
    )
    assert lost == {"c"}
    after = await records.get_many(["a", "b", "c"])
    assert after["a"][0].idle_since == 5.0 and after["b"][0].idle_since == 5.0
    assert after["c"][0].snoozed_by == "U2"  # the other writer's change is kept


async def _made_by(store: Store, release: ModuleType, row: dict[str, object]) -> None:
    """Empty the database, then lay it out as an earlier release left it, with one row."""
    async with store.engine.begin() as connection:
        cascade = " CASCADE" if store.engine.dialect.name == "postgresql" else ""
        names = await connection.run_sync(lambda sync: sa.inspect(sync).get_table_names())
        for name in names:
            await connection.execute(sa.text(f"DROP TABLE IF EXISTS {name}{cascade}"))
        await connection.run_sync(release.metadata.create_all)
        await connection.execute(
            release.meta.insert().values(key="schema_version", value=str(release.SCHEMA_VERSION))
        )
        await connection.execute(release.requests.insert().values(**row))


OLD_ROW = {
    "id": "r-old",
    "kind": "resize",
    "cluster": a_request().cluster,
    "plan": a_request().plan.model_dump_json(),
    "requester": "U1",
    "channel": "C1",
    "created_at": 1000.0,
    "expires_at": 2000.0,
    "state": "running",
    "origin": "command",
    "card_ts": "1700000000.000100",
}


@pytest.mark.parametrize("release", [schema_v2, schema_v3], ids=["release-2", "release-3"])
async def test_upgrade_from_an_earlier_release(database: Store, release: ModuleType) -> None:
    store = database
    """A database an earlier release made (with a request in flight) is brought up to date on
    start: its rows kept, the new rules in force, its old version table gone."""
    await _made_by(store, release, OLD_ROW)
    assert await store.migrate() == HEAD
    loaded = await store.get_request("r-old")
    assert loaded is not None and loaded.state == RequestState.RUNNING
    assert loaded.card_message == "1700000000.000100"
    assert loaded.owner is None and loaded.lease_until == 0.0
    with pytest.raises(OpenRequestExistsError):  # the new index applies to old rows too
        await store.add_request(a_request("r-new"))
    assert await store.take_lease("idle-sweep", "a", 1.0, 10.0)  # new tables exist
    async with store.engine.connect() as connection:
        assert await connection.run_sync(differences) == []
        tables = await connection.run_sync(lambda sync: sa.inspect(sync).get_table_names())
    assert "clusterbot_meta" not in tables and "alembic_version" in tables


async def test_an_upgrade_mid_change_owes_the_following_of_every_operation_in_flight(
    database: Store,
) -> None:
    """A database of the release whose tracker claimed operations itself (revision 0010),
    with one operation still followed and one told: the upgrade owes the first's following,
    due at its next poll, so the change is followed to its end by the engine."""
    store = database
    async with store.engine.begin() as connection:
        await connection.run_sync(lambda sync: command.downgrade(_config(sync), "0010"))
        for name, final in (("op-live", None), ("op-told", "posted")):
            operation = tracked(name, f"r-{name}", started_at=100.0, next_poll_at=130.0)
            row = {**dataclasses.asdict(operation), "final": final, "lease_until": 0.0}
            row["thread_ts"], row["progress_ts"] = row.pop("thread"), row.pop("progress_message")
            then = sa.table("tracked_operations", *(sa.column(name) for name in row))
            await connection.execute(then.insert().values(**row))
    assert await store.migrate() == HEAD
    [item] = await store.owed_items(kinds=["follow"])
    assert (item.key, item.subject, item.due_at) == (
        "follow:r-op-live",
        {"operation": "op-live"},
        130.0,
    )
    assert await store.migrate() == HEAD  # once


async def test_an_upgrade_gives_spend_and_health_the_records_the_idle_record_carried(
    database: Store,
) -> None:
    """A database of the release whose idle record carried the spend runs, the labels and
    the health episode (revision 0011): the upgrade gives each its own record, and the idle
    record still reads as before."""
    store = database
    run = OpenRun("gpu", 10.0, 4, 70.0, True, 70.0)
    episode = Episode("c1", opened_at=5.0, seen_at=6.0, problems=("node:a1",), alert_message="9")
    document = {
        "cluster": "c1",
        "idle_since": 3.0,
        "alert_ts": "1.2",
        "history": [[1.0, 3.0, True]],
        "spending": [run.to_list()],
        "labels": [["team", "vision"]],
        "episode": episode.to_dict(),
    }
    async with store.engine.begin() as connection:
        await connection.run_sync(lambda sync: command.downgrade(_config(sync), "0011"))
        await connection.execute(
            sa.text("INSERT INTO idle_records VALUES ('c1', :r, 4, 1.0)"),
            {"r": json.dumps(document)},
        )
    assert await store.migrate() == HEAD
    keeper = StoreKeeper(store)
    assert await keeper.of(SPEND_RECORD).get("c1") == (
        SpendRecord("c1", (run,), (("team", "vision"),)),
        1,
    )
    assert await keeper.of(HEALTH_RECORD).get("c1") == (HealthRecord("c1", episode), 1)
    idle, version = await IdleRecords(store).get("c1")
    assert (idle.idle_since, idle.alert_message, idle.history, version) == (
        3.0,
        "1.2",
        (Run(1.0, 3.0, True),),
        4,
    )


async def test_a_submission_is_taken_once_and_found_when_left_unfinished(store: Rows) -> None:
    first = Submission("V1:h1", "U0ALICE", "C1", "resize form", 100.0, "one")
    assert await store.receive_submission(first) is True
    assert await store.receive_submission(replace(first, owner="two")) is False  # a replay
    other = Submission("V2:h1", "U0BOB", "C1", "delete form", 150.0, "two")
    assert await store.receive_submission(other) is True
    # while running: only what is older than the cut-off; at start, its own as well
    assert [s.key for s in await store.unfinished_submissions("", 120.0)] == ["V1:h1"]
    found = sorted(s.key for s in await store.unfinished_submissions("two", 120.0))
    assert found == ["V1:h1", "V2:h1"]
    [kept] = await store.unfinished_submissions("", 120.0)
    assert kept == first
    await store.submission_made("V1:h1")
    assert await store.unfinished_submissions("", 1000.0) == [other]
    assert await store.receive_submission(first) is False  # made, and still known
    await store.forget_submissions(120.0)  # past replay: forgotten; unfinished ones stay
    assert await store.receive_submission(first) is True
    await store.drop_submission("V2:h1")
    assert [s.key for s in await store.unfinished_submissions("", 1000.0)] == ["V1:h1"]


async def test_the_requests_of_an_origin_asked_in_a_window_in_a_channel(store: Rows) -> None:
    """A roll-up's nights: asked by schedules in its channel in its window, with their card
    in a thread (kept as asked)."""
    base = a_request("r1")

    def asked(n: int, at: float, channel: str = "C1", origin: Origin = Origin.SCHEDULE) -> None:
        cluster = f"projects/p/locations/r/modelDevelopmentClusters/c{n}"
        plan = base.plan.model_copy(update={"cluster": cluster})
        request = dataclasses.replace(
            base, id=f"r{n}", plan=plan, channel=channel, origin=origin, created_at=at
        )
        request.card_thread = f"t{n}"
        requests.append(request)

    requests: list[ApprovalRequest] = []
    asked(1, 60.0)
    asked(2, 119.9)
    asked(3, 120.0)  # the next window
    asked(4, 90.0, channel="C2")
    asked(5, 90.0, origin=Origin.COMMAND)
    for request in requests:
        await store.add_request(request)
    found = await store.asked_in("C1", str(Origin.SCHEDULE), 60.0, 120.0)
    clusters = [c.rsplit("/", 1)[-1] for c, _ in found]
    assert clusters == ["c1", "c2"] and {s for _, s in found} == {base.state}
    kept = await store.get_request("r2")
    assert kept is not None and kept.card_thread == "t2" and kept.lines_thread == "t2"


async def test_requests_since_are_the_requesters_own(store: Rows) -> None:
    await store.add_request(a_request("r1"))
    requester = a_request("r1").requester
    created = a_request("r1").created_at
    assert [r.id for r in await store.requests_since(requester, created)] == ["r1"]
    assert await store.requests_since(requester, created + 1) == []
    assert await store.requests_since("U0SOMEONE", 0.0) == []


async def test_spend_runs_are_kept_once_and_read_by_period(store: Rows) -> None:
    """A run written twice (a crash between the ledger and the idle records, then the next
    sweep) is one row with its latest end; a period reads the runs that overlap it."""
    c1 = a_request().cluster
    first = SpendRun(c1, "gpu", 0.0, 3600.0, 4, 70.0, False, "p/r", (("team", "vision"),))
    again = dataclasses.replace(first, end=7200.0)
    login = SpendRun(c1, "login", 0.0, 7200.0, 1, None, False, "p/r")
    other = SpendRun(
        "projects/p/locations/r/modelDevelopmentClusters/c2",
        "gpu",
        9000.0,
        9600.0,
        2,
        70.0,
        True,
        "p/r",
    )
    await store.record_spend([first, login])
    await store.record_spend([again, other])
    assert await store.spend_between(0.0, 10_000.0, c1) == [again, login]
    assert await store.spend_between(7200.0, 9000.0) == []  # touching is not overlapping
    assert await store.spend_between(9500.0, 9501.0) == [other]


async def test_each_capability_keeps_its_own_record_of_a_cluster(store: Rows) -> None:
    """The spend ledger's open runs and health's episode are records of their own, beside
    the idle record of the same cluster: each written by compare-and-set on its own version,
    none touching another's."""
    keeper = MemoryKeeper() if isinstance(store, MemoryStore) else StoreKeeper(store)
    idle, spend, health = idle_records(store), keeper.of(SPEND_RECORD), keeper.of(HEALTH_RECORD)
    run = OpenRun("gpu", 10.0, 4, 70.0, True, 70.0)
    spent = SpendRecord("c1", (run,), (("team", "vision"),))
    episode = Episode("c1", opened_at=5.0, seen_at=6.0, problems=("node:a1",), owed=True)
    assert await idle.put("c1", IdleRecord(cluster="c1", idle_since=3.0), 0, 1.0)
    assert await spend.put("c1", spent, 0, 1.0)
    assert await health.put("c1", HealthRecord("c1", episode), 0, 1.0)
    assert (await spend.get("c1")) == (spent, 1)
    assert (await health.get("c1")) == (HealthRecord("c1", episode), 1)
    assert await health.put("c1", HealthRecord("c1", None), 1, 2.0)
    assert not await health.put("c1", HealthRecord("c1", episode), 1, 3.0)  # stale
    assert (await spend.get("c1"))[1] == 1 and (await idle.get("c1"))[0].idle_since == 3.0
    assert [cluster for cluster, _ in await spend.all()] == ["c1"]
    await spend.delete("c1")
    assert await spend.all() == [] and (await health.get("c1"))[1] == 2
    assert (await idle.get("c1"))[1] == 1
