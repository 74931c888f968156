"""The read side, declared: help, list, show, deleted, ops, idle and audit; Sweep now on a
report, and the audit's Older and CSV."""

from __future__ import annotations

from handlers.actions import (
    ActionId,
    AuditPage,
    SweepNow,
    audit_page,
)
from handlers.capability import Capability, Kernel
from handlers.clicking import Clicked, click
from handlers.commanding import Subcommand, nothing, one_cluster
from handlers.policy import Role
from handlers.reading.audit import Audit, parse_audit
from handlers.reading.commands import (
    AUDIT_USAGE,
    DELETED_USAGE,
    HELP_USAGE,
    IDLE_USAGE,
    LIST_USAGE,
    OPS_USAGE,
    SHOW_USAGE,
    Deleted,
    Idle,
    ListClusters,
    Ops,
    Reading,
    Show,
    parse_help,
    run_help,
)
from handlers.replies import Reply


def build(kernel: Kernel) -> Reading:
    return Reading(kernel.reports, kernel.commands)


async def _audit(reading: Reading, clicked: Clicked[AuditPage]) -> Reply | None:
    page = clicked.action
    query = Audit(page.cluster, page.by, page.since, page.before)
    if page.csv:
        return await reading.reports.audit_csv(query, clicked.channel or "", clicked.user)
    return await reading.reports.audit(query)


READING = Capability(
    "reading",
    build,
    commands=(
        Subcommand(
            "help",
            HELP_USAGE,
            "this help, or one subcommand's",
            Role.VIEWER,
            parse_help,
            run_help,
            instant=True,
        ),
        Subcommand(
            "list",
            LIST_USAGE,
            "every cluster of every target, with nodes and estimated cost",
            Role.VIEWER,
            nothing(LIST_USAGE, ListClusters),
            lambda r, c, who: r.reports.clusters(),
        ),
        Subcommand(
            "show",
            SHOW_USAGE,
            "one cluster: pools, node states, partitions, Slurm settings, recent events",
            Role.VIEWER,
            one_cluster(SHOW_USAGE, Show),
            lambda r, c, who: r.reports.cluster(c.cluster),
        ),
        Subcommand(
            "deleted",
            DELETED_USAGE,
            "the deleted clusters clusterbot can restore, with their pools and cost",
            Role.VIEWER,
            nothing(DELETED_USAGE, Deleted),
            lambda r, c, who: r.reports.deleted(),
        ),
        Subcommand(
            "ops",
            OPS_USAGE,
            "operations in flight, with age and progress",
            Role.VIEWER,
            nothing(OPS_USAGE, Ops),
            lambda r, c, who: r.reports.ops(),
        ),
        Subcommand(
            "idle",
            IDLE_USAGE,
            "the idle report now",
            Role.VIEWER,
            nothing(IDLE_USAGE, Idle),
            lambda r, c, who: r.reports.idle(),
        ),
        Subcommand(
            "audit",
            AUDIT_USAGE,
            "who asked, approved or ended what, newest first, with Older for more",
            Role.VIEWER,
            parse_audit,
            lambda r, c, who: r.reports.audit(c),
            heavy=True,
        ),
    ),
    clicks=(
        click(
            (ActionId.SWEEP_NOW,),
            lambda i, v: SweepNow(),
            Role.VIEWER,
            "Sweeping",
            lambda r, c: r.reports.sweep_now(),
            in_place=lambda _a: True,  # a new report takes the place of the one clicked
        ),
        click(
            (ActionId.AUDIT_PAGE, ActionId.AUDIT_CSV),
            lambda i, v: audit_page(v, csv=i == ActionId.AUDIT_CSV),
            Role.VIEWER,
            "Reading the audit log",
            _audit,
            in_place=lambda a: not a.csv,  # the next page takes the place of the one clicked
        ),
    ),
)
