"""``/cluster jobs`` and ``/cluster fairshare``: Slurm's queue and fair-share tree in Slack,
read from slurmrestd through ``:callSlurmRestApi``, as ``squeue`` and ``sshare`` show them.

slurmrestd's job list carries each job's priority but not ``sprio``'s weighted factors, so a
pending job shows its priority, its QOS and partition, how long it has waited (the age
factor's input) and its user's fair-share factor from ``GET /shares``. A long queue is cut to
what a message holds, saying how many more there are and how to narrow it.
"""

from __future__ import annotations

from collections.abc import Sequence

from handlers.domain.operations import Share, SlurmJob
from handlers.replies import Code, Heading, Note, Reply, Table, Text
from handlers.slurm.reasons import reason_of
from handlers.words import duration, plural

SHOWN = 25  # rows of each table: two tables in a message stay well inside Block Kit's limits
RUNNING = frozenset({"RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "STAGE_OUT"})
RUNNING_TITLES = ("RUNNING", "NAME", "USER", "PARTITION", "NODES", "ELAPSED")
PENDING_TITLES = ("PENDING", "NAME", "USER", "PARTITION", "NODES", "QUEUED", "PRIO", "FS", "WHY")


def _matches(job: SlurmJob, user: str | None, partition: str | None, state: str | None) -> bool:
    if user is not None and job.user != user:
        return False
    if partition is not None and partition not in job.partition.split(","):
        return False
    if state == "pending":
        return job.pending
    if state == "running":
        return bool(RUNNING & job.states)
    return job.pending or bool(RUNNING & job.states)


def _cut(count: int, shown: int, what: str) -> list[Note]:
    if count <= shown:
        return []
    return [
        Note(
            f"{count - shown} more {what} not shown; narrow with ",
            Code("user U"),
            ", ",
            Code("partition P"),
            " or ",
            Code(f"state {what}"),
            ".",
        )
    ]


def _fair_share(shares: Sequence[Share] | None, job: SlurmJob) -> str:
    if not shares:
        return "-"
    own = [s for s in shares if s.user == job.user and s.account in (job.account, "")]
    own = own or [s for s in shares if s.user == job.user]
    factor = own[0].fairshare if own else None
    return "-" if factor is None else f"{factor:.2f}"


def jobs_reply(
    cluster_id: str,
    jobs: Sequence[SlurmJob],
    shares: Sequence[Share] | None,
    now: float,
    *,
    user: str | None = None,
    partition: str | None = None,
    state: str | None = None,
) -> Reply:
    """Running jobs with their elapsed time; pending jobs, highest priority first, with
    what they wait for in words."""
    chosen = [j for j in jobs if _matches(j, user, partition, state)]
    running = sorted((j for j in chosen if not j.pending), key=lambda j: j.started or 0)
    pending = sorted(
        (j for j in chosen if j.pending), key=lambda j: (-(j.priority or 0), j.submitted or 0)
    )
    filters = [f"{k} {v}" for k, v in (("user", user), ("partition", partition)) if v]
    filters += [f"state {state}"] if state else []
    where = f" ({', '.join(filters)})" if filters else ""
    summary = f"{plural(len(running), 'running job')}, {sum(j.tasks for j in pending)} pending"
    reply = Reply(f"Jobs on {cluster_id}: {summary}").add(
        Heading(f"Jobs on {cluster_id}"), Text(f"{summary}{where}.")
    )
    if running:
        rows: list[tuple[object, ...]] = [
            (
                j.shown_id,
                j.name,
                j.user,
                j.partition,
                j.node_count,
                duration(now - j.started) if j.started else "-",
            )
            for j in running[:SHOWN]
        ]
        reply.add(Table.of(RUNNING_TITLES, rows, right=frozenset({4})))
        reply.add(*_cut(len(running), SHOWN, "running"))
    if pending:
        rows = [
            (
                j.shown_id,
                j.name,
                j.user,
                j.partition,
                j.node_count,
                duration(now - j.submitted) if j.submitted else "-",
                j.priority if j.priority is not None else "-",
                _fair_share(shares, j),
                j.reason,
            )
            for j in pending[:SHOWN]
        ]
        reply.add(Table.of(PENDING_TITLES, rows, right=frozenset({4, 6, 7})))
        reply.add(*_cut(len(pending), SHOWN, "pending"))
        reasons = dict.fromkeys(j.reason for j in pending[:SHOWN])
        for reason in reasons:
            reply.add(Note(Code(reason), f": {reason_of(reason).words}"))
        reply.add(
            Note(
                "PRIO is Slurm's priority (higher starts first) and FS the user's fair-share "
                "factor (1: far below its share, 0: far above); slurmrestd does not list "
                "sprio's weighted factors."
            )
        )
    if not chosen:
        reply.add(
            Text(
                "No job matches."
                if filters
                else "The queue is empty as the bot's Linux account sees it (slurm.conf "
                "PrivateData can hide other users' jobs)."
            )
        )
    return reply


def fairshare_reply(cluster_id: str, shares: Sequence[Share]) -> Reply:
    """Each account, then its users, as ``sshare -a`` lists them."""

    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    rows = []
    accounts = [s for s in shares if s.user is None]
    for account in sorted(accounts, key=lambda s: s.account):
        members = sorted(
            (s for s in shares if s.user and s.account == account.account),
            key=lambda s: s.user or "",
        )
        for row in (account, *members):
            rows.append(
                (
                    row.account if row.user is None else "",
                    row.user or "",
                    "-" if row.shares is None else row.shares,
                    number(row.shares_normalized),
                    number(row.usage_normalized),
                    number(row.effective_usage),
                    number(row.fairshare),
                )
            )
    reply = Reply(f"Fair share on {cluster_id}").add(Heading(f"Fair share on {cluster_id}"))
    if not rows:
        return reply.add(Text("slurmrestd lists no associations for this cluster."))
    titles = ("ACCOUNT", "USER", "RAW", "NORM SHARES", "NORM USAGE", "EFFECTV USAGE", "FAIRSHARE")
    return reply.add(
        Table.of(titles, rows, right=frozenset({2, 3, 4, 5, 6})),
        Note(
            "As sshare shows it: a FAIRSHARE near 1 means far below its share, so its jobs "
            "rise in priority; near 0, far above it."
        ),
    )
