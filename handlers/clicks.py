"""Every click a person can make, in one table: the core's clicks here, each capability's
beside the actions its cards carry (``handlers/schedules/clicks.py``), each declared once
(``handlers.clicking.click``).

The dispatcher's role checks and metrics, and the platform's listeners, all come from this
table; building it refuses two clicks that answer one action id, and an id of ``ActionId``
that no click answers. A new button is its typed action and one ``click`` beside it.
"""

from __future__ import annotations

from collections.abc import Sequence

from handlers.actions import (
    Action,
    ActionError,
    ActionId,
    AuditPage,
    Decide,
    HealthSweepNow,
    Keep,
    Remedy,
    RestoreClicked,
    SweepNow,
    Unsnooze,
    Withdraw,
    audit_page,
    needs,
    open_form,
    snooze,
)
from handlers.clicking import Click, Clicked, click
from handlers.desk import Desk
from handlers.health.clicks import CLICKS as HEALTH_CLICKS
from handlers.policy import Role
from handlers.reading.audit import Audit
from handlers.reading.reports import NO_IDLE
from handlers.replies import Reply, notice
from handlers.schedules.clicks import CLICKS as SCHEDULE_CLICKS


async def _no_idle() -> Reply:
    return notice("Idle report", NO_IDLE)


CORE: tuple[Click, ...] = (
    click(
        (ActionId.APPROVE, ActionId.REJECT),
        lambda i, v: Decide(needs(v), approve=i == ActionId.APPROVE),
        Role.VIEWER,  # approvers only: the approval flow's rule
        "Deciding requests",
        lambda s, c: s.approvals.decide(
            c.user, c.role, c.action.request_id, c.action.approve, c.card_message
        ),
    ),
    click(
        (ActionId.WITHDRAW,),
        lambda i, v: Withdraw(needs(v)),
        Role.VIEWER,  # the requester only: the approval flow's rule
        "Withdrawing a request",
        lambda s, c: s.approvals.withdraw(c.user, c.action.request_id, c.card_message),
    ),
    click(
        (ActionId.SCALE_TO_ZERO, ActionId.DELETE),
        lambda i, v: Remedy(needs(v), delete=i == ActionId.DELETE),
        Role.OPERATOR,
        "Acting on idle alerts",
        lambda s, c: _no_idle() if s.idle is None else s.idle.remedy(c.user, c.role, c.action),
        names_cluster=True,
    ),
    click(
        (ActionId.SNOOZE,),
        lambda i, v: snooze(v),
        Role.OPERATOR,
        "Acting on idle alerts",
        lambda s, c: _no_idle() if s.idle is None else s.idle.snooze(c.user, c.action),
        names_cluster=True,
    ),
    click(
        (ActionId.UNSNOOZE,),
        lambda i, v: Unsnooze(needs(v)),
        Role.OPERATOR,
        "Acting on idle alerts",
        lambda s, c: _no_idle() if s.idle is None else s.idle.unsnooze(c.user, c.action),
        names_cluster=True,
    ),
    click(
        (ActionId.KEEP, ActionId.UNKEEP),
        lambda i, v: Keep(needs(v), keep=i == ActionId.KEEP),
        Role.OPERATOR,
        "Acting on idle alerts",
        lambda s, c: _no_idle() if s.idle is None else s.idle.keep(c.user, c.action),
        names_cluster=True,
    ),
    click(
        (ActionId.SWEEP_NOW,),
        lambda i, v: SweepNow(),
        Role.VIEWER,
        "Sweeping",
        lambda s, c: s.reports.sweep_now(),
        in_place=lambda _a: True,  # a new report takes the place of the one clicked
    ),
    click(
        (ActionId.HEALTH_SWEEP_NOW,),
        lambda i, v: HealthSweepNow(),
        Role.VIEWER,
        "Sweeping",
        lambda s, c: s.reports.sweep_now(health=True),
        in_place=lambda _a: True,  # the new health takes the place of the one clicked
    ),
    click(
        (ActionId.RESTORE,),
        lambda i, v: RestoreClicked(needs(v)),
        Role.OPERATOR,
        "Restoring a deleted cluster",
        lambda s, c: s.approvals.restore_clicked(c.user, c.action.request_id),
    ),
    click(
        (ActionId.OPEN_RESIZE_FORM, ActionId.OPEN_DELETE_FORM, ActionId.OPEN_SCHEDULE_FORM),
        open_form,
        Role.VIEWER,
        "Opening a form",
        # where forms cannot open (the platform opens them on the click), the command does
        lambda s, c: _typed(f"Type /cluster {c.action.kind} with its words instead."),
    ),
    click(
        (ActionId.AUDIT_PAGE, ActionId.AUDIT_CSV),
        lambda i, v: audit_page(v, csv=i == ActionId.AUDIT_CSV),
        Role.VIEWER,
        "Reading the audit log",
        lambda s, c: _audit(s, c),
        in_place=lambda a: not a.csv,  # the next page takes the place of the one clicked
    ),
)
CLICKS: tuple[Click, ...] = (*CORE, *SCHEDULE_CLICKS, *HEALTH_CLICKS)


async def _typed(text: str) -> Reply:
    return notice("Form", text)


async def _audit(services: Desk, clicked: Clicked[AuditPage]) -> Reply | None:
    page = clicked.action
    query = Audit(page.cluster, page.by, page.since, page.before)
    if page.csv:
        return await services.reports.audit_csv(query, clicked.channel or "", clicked.user)
    return await services.reports.audit(query)


class ClickTable:
    """The clicks by action id; built once, refusing a collision or an id left unanswered."""

    def __init__(self, clicks: Sequence[Click] = CLICKS) -> None:
        self.by_id: dict[str, Click] = {}
        for declared in clicks:
            for action_id in declared.ids:
                if action_id in self.by_id:
                    raise ValueError(f"two clicks answer the action id {action_id}")
                self.by_id[action_id] = declared
        unanswered = sorted(set(ActionId) - set(self.by_id))
        if unanswered:
            raise ValueError(f"no click answers {', '.join(unanswered)}")

    def read(self, action_id: str, value: str) -> tuple[Click, Action]:
        """The click and its action; ``ActionError`` for anything this bot never offered."""
        click = self.by_id.get(action_id)
        if click is None:
            raise ActionError(f"clusterbot offers no action {action_id[:40]!r}")
        return click, click.read(action_id, value)
