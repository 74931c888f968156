"""The pipeline hook, the seed's "delete the cluster after the pipeline's last step":
``POST /api/v1/release`` (or ``clusterbot release``) asks to scale a cluster to zero or delete
it once its Slurm queue is empty.

1. The release is stored, then announced in the alert channel; its thread tells the rest.
2. Every check reads the cluster's Slurm (jobs, and nodes when no job is visible). An empty
   queue moves it to ``drained``; the action waits until the queue has stayed empty for the
   grace period (a minute by default), and a job that arrives meanwhile cancels it.
3. The action goes through the policy: a caller listed in ``[pipelines]`` for that action is
   pre-approved; anyone else's becomes an approval card like any change.
4. A queue that never empties before the deadline ends it with nothing done.
Every step is one conditional state change in the store, audited under the caller's identity.
"""

from __future__ import annotations

import logging
import secrets
from typing import Any, get_args

from handlers.changes.approvals import Approvals, new_request_id
from handlers.changes.delete import plan_delete
from handlers.changes.ledger import RequestLedger
from handlers.changes.pipelines import PIPELINES, PipelineCaller, ReleaseAction, caller_of
from handlers.changes.plan import ChangePlan
from handlers.changes.resize import plan_scale_to_zero
from handlers.domain.errors import SlurmUnreadableError
from handlers.entities import ApprovalRequest, Origin, Release, ReleaseState, RequestState
from handlers.errors import UserError
from handlers.grammar import CommandError
from handlers.messenger import Messenger, MessengerError
from handlers.policy import Policy
from handlers.ports import ActivityReader, Clock, CrashPoint, ReleaseStore, no_crash
from handlers.replies import Code, Line, Reply, Strong, Text
from handlers.sweep.observe import slurm_demand
from handlers.words import duration

log = logging.getLogger(__name__)
ACTIONS = get_args(ReleaseAction)
MAX_TIMEOUT = 7 * 24 * 3600.0


class ReleaseError(UserError, ValueError):
    """The release cannot be taken; the message is for the caller."""


class CallerRefused(ReleaseError):
    """The caller may not ask this (HTTP 403): nothing is stored, read or announced."""


class TooManyReleases(ReleaseError):
    """The caller asked too often (HTTP 429); ``retry_after`` seconds until it may again."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


ANNOUNCE_WAIT = 60.0  # seconds a check waits for a new release's announcement to be posted
RATE_LIMIT = 20  # releases one caller may start in RATE_WINDOW, on each replica
RATE_WINDOW = 3600.0


def _reply(release: Release, text: Line) -> Reply:
    return Reply(f"release {release.id} of {release.cluster_id}", public=True).add(Text(*text))


class Releases:
    def __init__(
        self,
        *,
        store: ReleaseStore,
        activity: ActivityReader,
        approvals: Approvals,
        ledger: RequestLedger,
        messenger: Messenger,
        policy: Policy,
        clock: Clock,
        channel: str | None,
        grace: float = 60.0,
        crash: CrashPoint = no_crash,
    ) -> None:
        self.store = store
        self.directory = approvals.directory  # the targets the releases may name
        self.activity = activity
        self.approvals = approvals
        self.ledger = ledger
        self.messenger = messenger
        self.policy = policy
        self.clock = clock
        self.channel = channel
        self.grace = grace  # how long the queue must stay empty before the action
        self._recent: dict[str, list[float]] = {}  # each caller's recent starts
        self.crash = crash

    def caller(self, email: str) -> PipelineCaller | None:
        """The release hook's entry for ``email`` in ``[pipelines]``; None: not a caller."""
        return caller_of(self.policy.section(PIPELINES), email)

    def pre_approved(self, caller: str, action: str) -> bool:
        entry = self.caller(caller)
        return entry is not None and action in entry.pre_approved

    async def start(self, caller: str, cluster_key: str, action: str, wait: float) -> Release:
        """Store the release, then announce it; ``ReleaseError`` or ``CommandError`` when the
        cluster or the action is not one that can be released."""
        entry = self.caller(caller)
        if entry is None:  # anyone can mint a Google-signed token: only named callers count
            raise CallerRefused(f"{caller} is not a caller of the release hook")
        if action not in ACTIONS:
            raise ReleaseError(f"then must be scale-to-zero or delete, not {action[:40]!r}")
        if not entry.may(action):
            raise CallerRefused(f"{caller} may not ask to {action}")
        if not 0 < wait <= MAX_TIMEOUT:
            raise ReleaseError("timeout must be more than 0 and at most 7 days")
        if self.channel is None:
            raise ReleaseError("no alert channel is configured to report releases in")
        now = self.clock()
        self._count(caller, now)
        try:
            cluster = await self.directory.resolve(cluster_key, "release")
        except CommandError:  # the reasons name targets and clusters: a caller sees neither
            raise ReleaseError(
                f"{cluster_key[:120]!r} is not one cluster clusterbot manages and can read "
                "now; name it by its full resource name, or ask in Slack"
            ) from None
        release = Release(
            id=f"rel-{secrets.token_hex(5)}",
            cluster=cluster.name or "",
            action=action,
            caller=caller,
            created_at=now,
            deadline=now + wait,
            channel=self.channel,
        )
        await self.store.add_release(release)
        approval = (
            "pre-approved for it by the policy"
            if self.pre_approved(caller, action)
            else "an approver will be asked"
        )
        text: Line = (
            Strong("Pipeline release"),
            ": ",
            Code(caller),
            f" asks to {action.replace('-', ' ')} ",
            Strong(release.cluster_id),
            f" once its Slurm queue is empty (waiting at most {duration(wait)}; {approval}). "
            "A job that arrives before then cancels it.",
        )
        try:
            release.thread = await self.messenger.post(self.channel, _reply(release, text))
            await self.store.update_release(release.id, thread=release.thread)
        except MessengerError as error:
            log.warning("release %s not announced: %s", release.id, error.code)
        await self._audit(release, "release_requested", timeout=wait)
        return release

    def _count(self, caller: str, now: float) -> None:
        """At most ``RATE_LIMIT`` releases a caller starts in ``RATE_WINDOW``: a caller
        looping on the hook would otherwise fill the alert channel."""
        recent = [t for t in self._recent.get(caller, []) if t > now - RATE_WINDOW]
        if len(recent) >= RATE_LIMIT:
            retry = recent[0] + RATE_WINDOW - now
            raise TooManyReleases(
                f"{caller} asked for {RATE_LIMIT} releases in {duration(RATE_WINDOW)}; "
                f"try again in {duration(retry)}",
                retry,
            )
        self._recent[caller] = [*recent, now]

    async def check_all(self) -> None:
        for release in await self.store.open_releases():
            try:
                await self.check(release)
            except Exception:  # one release's trouble must not stop the others
                log.exception("checking release %s failed; retrying at the next check", release.id)

    async def check(self, release: Release) -> None:
        if release.state == ReleaseState.ASKING:
            await self._resume(release)
            return
        now = self.clock()
        if release.thread is None and now - release.created_at < ANNOUNCE_WAIT:
            # stored, and being announced (here or on another replica): what a check says
            # goes in the announcement's thread, so it waits for it; one never posted (Slack
            # refused it) stops holding the release back after a minute
            return
        try:
            horizon = max(0.0, release.deadline - now)  # a job due before the timeout counts
            demand, census = await slurm_demand(self.activity, release.cluster, now, horizon)
        except SlurmUnreadableError as error:
            if now > release.deadline:
                await self._end(
                    release, ReleaseState.TIMED_OUT, f"Slurm could not be read ({error.reason})"
                )
            return
        # the idle rules' demand: held jobs and jobs that cannot start do not keep it waiting
        busy = demand.active or (census is not None and census.busy)
        what = f"{demand.running} running and {demand.pending} pending jobs"
        if release.state == ReleaseState.DRAINED and busy:
            await self._end(release, ReleaseState.CANCELLED, f"a job arrived first ({what})")
        elif now > release.deadline:
            await self._end(release, ReleaseState.TIMED_OUT, f"the queue still had {what}")
        elif release.state == ReleaseState.WAITING and not busy:
            if await self.store.move_release(
                release.id, ReleaseState.WAITING, ReleaseState.DRAINED, drained_at=now
            ):
                await self._say(
                    release,
                    f"the Slurm queue is empty; acting in {duration(self.grace)} if it stays so",
                )
        elif (
            release.state == ReleaseState.DRAINED
            and now - (release.drained_at or now) >= self.grace
        ):
            await self._act(release)

    async def _act(self, release: Release) -> None:
        plan = await self._plan(release)
        if plan is None:
            return
        # Intent before effect: the request's id is kept with the right to act, so a crash
        # anywhere from here on leaves a release that the next check finishes (``_resume``).
        request_id = new_request_id()
        if not await self.store.move_release(
            release.id,
            ReleaseState.DRAINED,
            ReleaseState.ASKING,
            request_id=request_id,
            outcome="asking",
        ):
            return  # another replica took it
        release.state, release.request_id = ReleaseState.ASKING, request_id
        self.crash("release-asking")
        await self._ask(release, plan)

    async def _plan(self, release: Release) -> ChangePlan[Any] | None:
        try:
            cluster = await self.directory.vertex.get_cluster(release.cluster)
            return (
                plan_delete(cluster, self.approvals.prices)
                if release.action == "delete"
                else plan_scale_to_zero(cluster, self.approvals.prices)
            )
        except UserError as error:
            why = f"it could not be planned: {error.said}"
            await self._end(release, ReleaseState.FAILED, why)
            return None

    async def _ask(self, release: Release, plan: ChangePlan[Any]) -> None:
        """Make the request under the id the release kept, then finish."""
        request_id = release.request_id or ""
        actor = f"pipeline:{release.caller}"
        try:
            await self.approvals.submit(
                actor, release.channel or "", plan, Origin.PIPELINE, request_id=request_id
            )
        except CommandError as error:
            if await self.approvals.store.get_request(request_id) is None:
                await self._end(
                    release, ReleaseState.FAILED, f"it could not be asked: {error.reason}"
                )
                return
            # another replica finishing the same release made it first: carry on with it
        self.crash("release-asked")
        await self._finish_asking(release)

    async def _resume(self, release: Release) -> None:
        """A release left asking by a crash: look at its request and finish what is owed."""
        request = await self.approvals.store.get_request(release.request_id or "")
        if request is None:  # the crash came before the request was stored
            plan = await self._plan(release)
            if plan is not None:
                await self._ask(release, plan)
        elif request.state == RequestState.DRAFT:
            return  # its card is owed, and posted however late; then this goes on
        elif request.state == RequestState.ABANDONED:
            # the card never made it: ask again, under a new id, at the next check
            await self.store.move_release(
                release.id, ReleaseState.ASKING, ReleaseState.DRAINED, outcome="asking again"
            )
        else:
            await self._finish_asking(release, request)

    async def _finish_asking(
        self, release: Release, request: ApprovalRequest | None = None
    ) -> None:
        request = request or await self.approvals.store.get_request(release.request_id or "")
        if request is None or request.state == RequestState.DRAFT:
            return  # its card is owed: the next check finishes the asking once it is posted
        actor = f"pipeline:{release.caller}"
        pre_approved = self.pre_approved(release.caller, release.action)
        if pre_approved and request.state == RequestState.PENDING:
            request = await self.approvals.approve_now(request, actor)  # once: a transition
        if not await self.store.move_release(
            release.id, ReleaseState.ASKING, ReleaseState.ACTED, outcome="asked"
        ):
            return  # another replica finished it
        release.state = ReleaseState.ACTED
        if pre_approved:
            await self._say(release, f"asked as request {request.id}, pre-approved; sent")
        else:
            await self._say(release, f"asked as request {request.id}; it waits for an approver")
        await self._audit(release, "release_acted", request=request.id)

    async def _end(self, release: Release, state: ReleaseState, why: str) -> None:
        if await self.store.move_release(release.id, release.state, state, outcome=why):
            waited = duration(release.deadline - release.created_at)
            done = {
                ReleaseState.CANCELLED: "cancelled",
                ReleaseState.TIMED_OUT: f"timed out after {waited}",
                ReleaseState.FAILED: "failed",
            }[state]
            await self._say(release, f"{done}: {why}; nothing was changed")
            await self._audit(release, f"release_{state}", reason=why)

    async def _say(self, release: Release, text: str) -> None:
        if release.channel is None or release.thread is None:
            return
        try:
            await self.messenger.post(
                release.channel,
                _reply(release, (Strong(release.cluster_id), f": {text}.")),
                thread=release.thread,
            )
        except MessengerError as error:
            log.warning("release %s: not reported (%s)", release.id, error.code)

    async def _audit(self, release: Release, action: str, **extra: Any) -> None:
        await self.ledger.record(
            release.caller,
            action,
            release.cluster,
            None,
            release=release.id,
            then=release.action,
            **extra,
        )
