"""Slurm, declared: its settings (read, or asked to change), the queue and fair share."""

from __future__ import annotations

from handlers.capability import Capability, Kernel
from handlers.changes.layout import SLURM_LAYOUT
from handlers.changes.scripts import SLURM_SCRIPTS
from handlers.changes.settings import SLURM_SETTINGS
from handlers.commanding import Subcommand, one_cluster
from handlers.forms.asks import slurm_form
from handlers.forms.kinds import ScriptForm, SettingForm
from handlers.policy import Role
from handlers.slurm.commands import (
    FAIRSHARE_USAGE,
    JOBS_USAGE,
    SLURM_USAGE,
    Fairshare,
    SlurmDesk,
    parse_jobs,
    parse_slurm,
    run_slurm,
    slurm_role,
)


def build(kernel: Kernel) -> SlurmDesk:
    return SlurmDesk(kernel.reports, kernel.approvals)


SLURM = Capability(
    "slurm",
    build,
    kinds=(SLURM_SETTINGS, SLURM_LAYOUT, SLURM_SCRIPTS),
    forms=(SettingForm(), ScriptForm()),
    commands=(
        Subcommand(
            "slurm",
            SLURM_USAGE,
            "the Slurm settings in full, or one script whole; change slurm.conf keys, "
            "partitions, the login pool or the prolog/epilog scripts (a second person approves)",
            Role.VIEWER,
            parse_slurm,
            run_slurm,
            role_for=slurm_role,
            form=slurm_form,
        ),
        Subcommand(
            "jobs",
            JOBS_USAGE,
            "Slurm's queue: running and pending jobs, why each waits, priority and fair share",
            Role.VIEWER,
            parse_jobs,
            lambda s, c, who: s.reports.jobs(c.cluster, c.user, c.partition, c.state),
            heavy=True,
        ),
        Subcommand(
            "fairshare",
            FAIRSHARE_USAGE,
            "each account's and user's shares, usage and fair-share factor, like sshare",
            Role.VIEWER,
            one_cluster(FAIRSHARE_USAGE, Fairshare),
            lambda s, c, who: s.reports.fairshare(c.cluster),
            heavy=True,
        ),
    ),
)
