"""Changes, declared: resize, delete and restore, and the clicks on an approval card
(Approve, Reject, Withdraw) and on a deleted cluster's Restore."""

from __future__ import annotations

from handlers.actions import ActionId, Decide, RestoreClicked, Withdraw, needs
from handlers.capability import Capability, Job, Kernel, Port
from handlers.changes.approvals import Approvals
from handlers.changes.commands import (
    DELETE_USAGE,
    RESIZE_USAGE,
    RESTORE_USAGE,
    Delete,
    parse_resize,
    parse_restore,
    run_change,
    run_restore,
)
from handlers.changes.delete import DELETE
from handlers.changes.pipelines import PIPELINES
from handlers.changes.release import Releases
from handlers.changes.resize import RESIZE
from handlers.changes.restore import RESTORE
from handlers.clicking import click
from handlers.commanding import Subcommand, one_cluster
from handlers.forms.asks import delete_form, resize_form
from handlers.forms.kinds import DeleteForm, ResizeForm
from handlers.policy import Role
from handlers.ports import ReleaseStore


def build(kernel: Kernel) -> Approvals:
    return kernel.approvals


CHANGES = Capability(
    "changes",
    build,
    commands=(
        Subcommand(
            "resize",
            RESIZE_USAGE,
            "ask to set a node pool's size (min and max node count); a second person approves",
            Role.OPERATOR,
            parse_resize,
            run_change,
            form=resize_form,
        ),
        Subcommand(
            "delete",
            DELETE_USAGE,
            "ask to delete a cluster; an approver confirms",
            Role.OPERATOR,
            one_cluster(DELETE_USAGE, Delete),
            run_change,
            form=delete_form,
        ),
        Subcommand(
            "restore",
            RESTORE_USAGE,
            "ask to create a deleted cluster again from the spec kept when it was deleted",
            Role.OPERATOR,
            parse_restore,
            run_restore,
        ),
    ),
    kinds=(RESIZE, DELETE, RESTORE),
    forms=(ResizeForm(), DeleteForm()),
    clicks=(
        click(
            (ActionId.APPROVE, ActionId.REJECT),
            lambda i, v: Decide(needs(v), approve=i == ActionId.APPROVE),
            Role.VIEWER,  # approvers only: the approval flow's rule
            "Deciding requests",
            lambda a, c: a.decide(
                c.user, c.role, c.action.request_id, c.action.approve, c.card_message
            ),
        ),
        click(
            (ActionId.WITHDRAW,),
            lambda i, v: Withdraw(needs(v)),
            Role.VIEWER,  # the requester only: the approval flow's rule
            "Withdrawing a request",
            lambda a, c: a.withdraw(c.user, c.action.request_id, c.card_message),
        ),
        click(
            (ActionId.RESTORE,),
            lambda i, v: RestoreClicked(needs(v)),
            Role.OPERATOR,
            "Restoring a deleted cluster",
            lambda a, c: a.restore_clicked(c.user, c.action.request_id),
        ),
    ),
)


RELEASE_STATE: Port[ReleaseStore] = Port("releases", ReleaseStore)  # the pipeline hook's


def build_releases(kernel: Kernel) -> Releases | None:
    """The pipeline hook's releases, where the store keeps them."""
    ports, options = kernel.ports, kernel.options
    store = ports.port(RELEASE_STATE)
    if store is None:
        return None
    return Releases(
        store=store,
        activity=ports.activity,
        approvals=kernel.approvals,
        ledger=kernel.ledger,
        messenger=ports.messenger,
        policy=kernel.policy,
        clock=ports.clock,
        channel=options.alert_channel,
        grace=options.release_grace,
        crash=options.crash,
    )


# the pipeline hook's releases: each waits for its queue to drain, then asks for its change
RELEASES = Capability(
    "releases",
    build_releases,
    ports=(RELEASE_STATE,),
    policy=(PIPELINES,),
    jobs=(Job("releases", lambda r: r.check_all()),),
)
