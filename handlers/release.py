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

from bot.vertex.errors import SlurmUnreadableError, VertexError
from handlers.approvals import Approvals
from handlers.clusters import ClusterDirectory
from handlers.entities import Origin, Release, ReleaseState
from handlers.grammar import CommandError
from handlers.ledger import RequestLedger
from handlers.messenger import Messenger, MessengerError
from handlers.plans import PlanError, plan_delete, plan_scale_to_zero
from handlers.policy import Policy, ReleaseAction
from handlers.ports import ActivityReader, Clock, ReleaseStore
from handlers.replies import Code, Line, Reply, Strong, Text
from handlers.sweep import slurm_demand
from handlers.words import duration

log = logging.getLogger(__name__)
ACTIONS = get_args(ReleaseAction)
MAX_TIMEOUT = 7 * 24 * 3600.0


class ReleaseError(ValueError):
    """The release cannot be taken; the message is for the caller."""


def _reply(release: Release, text: Line) -> Reply:
    return Reply(f"release {release.id} of {release.cluster_id}", public=True).add(Text(*text))


class Releases:
    def __init__(
        self,
        store: ReleaseStore,
        directory: ClusterDirectory,
        activity: ActivityReader,
        approvals: Approvals,
        ledger: RequestLedger,
        messenger: Messenger,
        policy: Policy,
        clock: Clock,
        channel: str | None,
        grace: float = 60.0,
    ) -> None:
        self.store = store
        self.directory = directory
        self.activity = activity
        self.approvals = approvals
        self.ledger = ledger
        self.messenger = messenger
        self.policy = policy
        self.clock = clock
        self.channel = channel
        self.grace = grace  # how long the queue must stay empty before the action

    def pre_approved(self, caller: str, action: str) -> bool:
        return action in self.policy.pipelines.get(caller, [])

    async def start(self, caller: str, cluster_key: str, action: str, wait: float) -> Release:
        """Store the release, then announce it; ``ReleaseError`` or ``CommandError`` when the
        cluster or the action is not one that can be released."""
        if action not in ACTIONS:
            raise ReleaseError(f"then must be scale-to-zero or delete, not {action[:40]!r}")
        if not 0 < wait <= MAX_TIMEOUT:
            raise ReleaseError("timeout must be more than 0 and at most 7 days")
        if self.channel is None:
            raise ReleaseError("no alert channel is configured to report releases in")
        cluster = await self.directory.resolve(cluster_key, "release")
        now = self.clock()
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
            release.thread_ts = await self.messenger.post(self.channel, _reply(release, text))
            await self.store.update_release(release.id, thread_ts=release.thread_ts)
        except MessengerError as error:
            log.warning("release %s not announced: %s", release.id, error.code)
        await self._audit(release, "release_requested", timeout=wait)
        return release

    async def check_all(self) -> None:
        for release in await self.store.open_releases():
            try:
                await self.check(release)
            except Exception:  # one release's trouble must not stop the others
                log.exception("checking release %s failed; retrying at the next check", release.id)

    async def check(self, release: Release) -> None:
        now = self.clock()
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
        try:
            cluster = await self.directory.vertex.get_cluster(release.cluster)
            plan = (
                plan_delete(cluster, self.approvals.prices)
                if release.action == "delete"
                else plan_scale_to_zero(cluster, self.approvals.prices)
            )
        except (PlanError, VertexError) as error:
            reason = error.user_message if isinstance(error, VertexError) else str(error)
            await self._end(release, ReleaseState.FAILED, f"it could not be planned: {reason}")
            return
        # the right to act is taken before the request exists: one replica asks, once
        if not await self.store.move_release(
            release.id, ReleaseState.DRAINED, ReleaseState.ACTED, outcome="asking"
        ):
            return
        actor = f"pipeline:{release.caller}"
        try:
            request = await self.approvals.submit(
                actor, release.channel or "", plan, origin=Origin.PIPELINE
            )
        except CommandError as error:
            release.state = ReleaseState.ACTED
            await self._end(release, ReleaseState.FAILED, f"it could not be asked: {error.reason}")
            return
        await self.store.update_release(release.id, request_id=request.id, outcome="asked")
        if self.pre_approved(release.caller, release.action):
            await self._say(release, f"asked as request {request.id}, pre-approved; sending it")
            await self.approvals.approve_now(request, actor)
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
        if release.channel is None or release.thread_ts is None:
            return
        try:
            await self.messenger.post(
                release.channel,
                _reply(release, (Strong(release.cluster_id), f": {text}.")),
                thread_ts=release.thread_ts,
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


def describe(release: Release) -> dict[str, Any]:
    """The release as the HTTP API answers it."""
    return {
        "release": release.id,
        "cluster": release.cluster,
        "then": release.action,
        "state": str(release.state),
        "deadline": release.deadline,
        "caller": release.caller,
        "thread_ts": release.thread_ts,
    }
