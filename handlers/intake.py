"""Form submissions, owned from their first byte.

A modal's submission is kept (``SubmissionStore``) before anything is read or asked, under
the view's id and hash, and it ends in exactly one of two ways: its request is made (the card
is posted, or the form shows what is wrong), or its sender is told privately that nothing was
posted. A stop that cuts the work off, or a crash, leaves the submission unfinished; it is
finished by looking at what exists (``settle``): a request the sender made since is told
about by its own end (a draft whose card was never confirmed is abandoned, and its
requester told, ``RequestLedger.tell_not_posted``), and otherwise the sender is told here.
A replica finishes its own at start, and any replica those older than ``STALE``.

The same key makes a replay harmless: a signed submission sent again within Slack's five
minutes finds its key taken, and nothing new is made. A made submission is kept for
``KEEP`` seconds, past the signature's life.
"""

from __future__ import annotations

import logging

from handlers.entities import Submission
from handlers.messenger import Messenger, tell_not_posted
from handlers.ports import Clock, CrashPoint, RequestStore, SubmissionStore, no_crash

log = logging.getLogger(__name__)

STALE = 60.0  # seconds after which another replica finishes a submission left unfinished
KEEP = 600.0  # seconds a made submission is kept, to know a replay (signatures live 300 s)


def submission_key(view_id: str, view_hash: str) -> str:
    return f"{view_id}:{view_hash}"[:200]


class Intake:
    def __init__(
        self,
        *,
        store: SubmissionStore,
        requests: RequestStore,
        messenger: Messenger,
        clock: Clock,
        owner: str,
        crash: CrashPoint = no_crash,
    ) -> None:
        self.store = store
        self.requests = requests
        self.messenger = messenger
        self.clock = clock
        self.owner = owner
        self.crash = crash

    async def receive(self, key: str, user: str, channel: str, what: str) -> Submission | None:
        """Keep a new submission before any work on it; None when it was received before."""
        submission = Submission(key, user, channel, what, self.clock(), self.owner)
        if not await self.store.receive_submission(submission):
            log.warning("a submission of view %s was received again; nothing new is made", key)
            return None
        self.crash("submission-received")
        return submission

    async def made(self, submission: Submission) -> None:
        """Its request was made: kept a while, so that a replay makes nothing."""
        await self.store.submission_made(submission.key)

    async def refused(self, submission: Submission) -> None:
        """The form showed what is wrong: the same form may be sent again, corrected."""
        await self.store.drop_submission(submission.key)

    async def settle(self, submission: Submission) -> None:
        """A submission whose work was cut off: its request's own end tells of it, or, when
        none was made, its sender is told here."""
        made = await self.requests.requests_since(submission.user, submission.received_at)
        if not made:
            await tell_not_posted(
                self.messenger, submission.channel, submission.user, submission.what
            )
        await self.store.drop_submission(submission.key)

    async def recover(self, starting: bool = False) -> int:
        """Anyone's submissions left unfinished past ``STALE``, and at start this replica's
        own (its earlier life's); returns how many were settled."""
        now = self.clock()
        await self.store.forget_submissions(now - KEEP)
        mine = self.owner if starting else ""  # while running, its own are its work in hand
        left = await self.store.unfinished_submissions(mine, now - STALE)
        for submission in left:
            await self.settle(submission)
        return len(left)
