"""The savings kept as rows of the succeeded changes (``handlers/spend/savings.py``): each
saves until its cluster's next kept change (``ended``, mended as rows are added), and a
period's savings are summed by the database."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.store import schema
from bot.store.locks import CHANGES_LOCK, one_at_a_time
from bot.store.saved_rollup import fleet_days, fleet_totals, repiece
from bot.store.spend_rollup import SETTLE_PAGE, WEEK, Span
from bot.store.spend_sql import at_once, day_of, in_days, of_cluster
from handlers.entities import RequestState
from handlers.spend.runs import DAY
from handlers.spend.savings import ChangeDone, SavedSum

_t = schema.changes_done.c
# what a kept change's pieces are cut from (``repiece``)
_ENDS = (_t.request_id, _t.cluster, _t.cause, _t.per_hour, _t.finished_at, _t.ended)


def _mend_ended(clusters: Collection[str], earliest: float) -> sa.Update:
    """Each kept change of ``clusters`` whose saving may end at a change kept from
    ``earliest`` on takes the time of its cluster's next change (in time, then id)."""
    table = schema.changes_done
    n = table.alias("n")
    after = sa.and_(  # a range of the (cluster, time) index, ties told apart by id
        n.c.finished_at >= table.c.finished_at,
        sa.or_(n.c.finished_at > table.c.finished_at, n.c.request_id > table.c.request_id),
    )
    following = sa.select(sa.func.min(n.c.finished_at)).where(n.c.cluster == table.c.cluster, after)
    return (
        table.update()
        .where(
            table.c.cluster.in_(clusters),
            sa.or_(table.c.ended.is_(None), table.c.ended >= earliest),
        )
        .values(ended=following.scalar_subquery())
    )


def _savings_sums(
    since: Any, until: Any, dialect: str, *which: sa.ColumnElement[bool]
) -> tuple[sa.Select[Any], sa.Select[Any]]:
    """The savings within [since, until) (times, or bound values) of the kept changes
    ``which`` (all: none named) summed by cluster and cause, and by UTC day: each succeeded
    change that cut a cluster's cost saves until the cluster's next kept change (``ended``,
    kept with the rows), clipped to the period; the days split as the runs' are."""
    table = schema.changes_done
    changes = sa.select(
        table.c.cluster, table.c.cause, table.c.per_hour, table.c.finished_at, table.c.ended
    ).where(
        table.c.finished_at < until,
        sa.or_(table.c.ended.is_(None), table.c.ended > since),
        table.c.cause.is_not(None),
        table.c.per_hour.is_not(None),
        *which,
    )
    c = changes.subquery().c
    start = sa.case((c.finished_at > since, c.finished_at), else_=since)
    stop = sa.func.coalesce(c.ended, until)
    end = sa.case((stop < until, stop), else_=until)
    saved = (sa.func.sum(c.per_hour * (end - start)) / 3600.0).label("saved")
    totals = sa.select(c.cluster, c.cause, saved).where(end > start).group_by(c.cluster, c.cause)
    first = sa.select(
        c.per_hour, start.label("s"), end.label("e"), day_of(start, dialect).label("day")
    ).where(end > start)
    p, within = in_days(first, "saved_pieces", ("per_hour",))
    daily = sa.select(p.day, (sa.func.sum(p.per_hour * within) / 3600.0).label("saved")).group_by(
        p.day
    )
    return totals, daily


def _summed(parts: Sequence[sa.Select[Any]], *keys: str) -> sa.Select[Any]:
    """The rows of ``parts`` (their ``keys`` and ``saved``) summed by ``keys``, one query."""
    rows = sa.union_all(*parts).subquery()
    by = [rows.c[key] for key in keys]
    return sa.select(*by, sa.func.sum(rows.c.saved).label("saved")).group_by(*by)


# the fleet's savings' statements, built once for each shape of period
_FLEET: dict[tuple[Any, ...], tuple[sa.Select[Any], sa.Select[Any]]] = {}


def _fleet_savings(
    since: float, until: float, dialect: str
) -> tuple[tuple[sa.Select[Any], sa.Select[Any]], dict[str, float]]:
    """The fleet's savings over [since, until) by cluster and cause, and by day, each in
    one query (the open ones from the changes, the ended ones rolled up), and their bound
    values: built once for the period's shape, as they take a few milliseconds to build."""
    weeks, week_values = Span.of(since, until, WEEK).bound("week")
    days, day_values = Span.of(since, until, DAY).bound("day")
    key = (dialect, weeks.shape, days.shape)
    built = _FLEET.get(key)
    if built is None:
        still_open = schema.changes_done.c.ended.is_(None)
        totals, daily = _savings_sums(weeks.since, weeks.until, dialect, still_open)
        built = _FLEET[key] = (
            _summed([totals, *fleet_totals(weeks)], "cluster", "cause"),
            _summed([daily, *fleet_days(days, dialect)], "day"),
        )
    return built, {**week_values, **day_values}


class SavedRows:
    engine: AsyncEngine
    reads: AsyncEngine  # of one statement each, without a transaction

    async def keep_changes_done(self, done: Sequence[ChangeDone]) -> None:
        if not done:
            return
        table = schema.changes_done
        postgres = self.engine.dialect.name == "postgresql"
        dialect = postgresql if postgres else sqlite
        statement = (
            dialect.insert(table)
            .on_conflict_do_nothing(index_elements=["request_id"])
            .returning(table.c.cluster, table.c.finished_at)
        )
        async with self.engine.begin() as connection:
            await one_at_a_time(connection, CHANGES_LOCK)  # each sees the other's to mend
            rows = [dict(vars(c)) for c in done]  # flat: not asdict's deep copies
            added = (await connection.execute(statement, rows)).all()
            if added:  # only the rows added move an end: those kept before changed nothing
                clusters = {row.cluster for row in added}
                mend = _mend_ended(clusters, min(row.finished_at for row in added))
                changed = await connection.execute(mend.returning(*_ENDS))
                await repiece(connection, changed.all())

    async def settle_savings(self, since: float) -> int:
        """The kept changes that ended or were ended from ``since`` on cut again, and the
        roll-ups of their pieces summed again: changes kept by a replica that did not cut them
        (of an earlier release, during an upgrade) are mended by the next settling. How many
        changes were looked at."""
        t = schema.changes_done
        recent = sa.or_(t.c.finished_at >= since, t.c.ended >= since)
        looked, after = 0, ""
        while True:  # SETTLE_PAGE changes a transaction: a few ms between awaits
            query = sa.select(*_ENDS).where(recent, t.c.request_id > after)
            async with self.engine.begin() as connection:
                await one_at_a_time(connection, CHANGES_LOCK)
                changes = (
                    await connection.execute(query.order_by(t.c.request_id).limit(SETTLE_PAGE))
                ).all()
                await repiece(connection, changes)
            looked += len(changes)
            if len(changes) < SETTLE_PAGE:
                return looked
            after = changes[-1].request_id

    async def changes_unkept(self, margin: float) -> list[str]:
        """The succeeded requests not kept yet, in one query: those that ended from
        ``margin`` before the newest kept change on (all when none is kept) less the kept."""
        d, r = schema.changes_done, schema.requests
        newest = sa.select(sa.func.max(d.c.finished_at)).scalar_subquery()
        since = sa.func.coalesce(newest - margin, 0.0)
        kept = sa.select(d.c.request_id).where(d.c.finished_at >= since)
        query = (
            sa.select(r.c.id)
            .where(
                r.c.state == str(RequestState.SUCCEEDED),
                r.c.finished_at >= since,
                r.c.id.not_in(kept),
            )
            .order_by(r.c.finished_at, r.c.id)
        )
        async with self.reads.connect() as connection:
            return [str(request_id) for (request_id,) in await connection.execute(query)]

    async def savings_sums(
        self, since: float, until: float, cluster: str | None = None
    ) -> list[SavedSum]:
        dialect, table = self.engine.dialect.name, schema.changes_done
        if cluster is not None:
            which = of_cluster(cluster, table.c.cluster)
            totals, daily = _savings_sums(since, until, dialect, which)
            by_cluster, by_day = await at_once(self.reads, totals, daily)
        else:  # the ended savings rolled up (and their edges), the open ones from the changes
            queries, values = _fleet_savings(since, until, dialect)
            by_cluster, by_day = await at_once(self.reads, *queries, values=values)
        # a row a cluster and cause, and a row a day, as the database summed them
        return [SavedSum(c, cause, float(saved)) for c, cause, saved in by_cluster] + [
            SavedSum("", "", float(saved), float(day)) for day, saved in sorted(by_day)
        ]
