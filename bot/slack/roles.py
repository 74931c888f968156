"""A person's role from the policy, with Slack user groups resolved: the core's
``RoleSource`` for Slack (``usergroups.users.list``, cached a few minutes)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.people import SLACK_PEOPLE
from handlers.policy import Policy, Role

log = logging.getLogger(__name__)
GROUP_CACHE_SECONDS = 300.0


class Roles:
    """A user's role from the policy, resolving Slack user groups (cached a few minutes).

    The cache starts empty and stale: the first lookup always reads the groups, whatever
    the clock reads (a monotonic clock counts from boot, so "0" is not "long ago")."""

    def __init__(
        self,
        policy: Policy,
        client: AsyncWebClient,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy
        self.client = client
        self.clock = clock
        self._members: dict[str, frozenset[str]] = {}
        self._fetched: float | None = None

    async def _groups_of(self, user: str) -> frozenset[str]:
        groups = self._groups()
        if not groups:
            return frozenset()
        if self._fetched is None or self.clock() - self._fetched > GROUP_CACHE_SECONDS:
            members: dict[str, frozenset[str]] = {}
            for group in sorted(groups):
                try:
                    reply = await self.client.usergroups_users_list(usergroup=group)
                    members[group] = frozenset(reply.get("users") or [])
                except SlackApiError as error:
                    needed = error.response.get("needed")  # with missing_scope: the scope
                    log.warning(
                        "cannot read user group %s: %s%s",
                        group,
                        error.response.get("error"),
                        f" (the app needs the {needed} scope)" if needed else "",
                    )
                    members[group] = frozenset()
            self._members, self._fetched = members, self.clock()
        return self._member_of(user)

    def _groups(self) -> set[str]:
        """The user groups the policy names."""
        return {m for m in self.policy.members() if SLACK_PEOPLE.is_group(m)}

    def _member_of(self, user: str) -> frozenset[str]:
        return frozenset(g for g, users in self._members.items() if user in users)

    async def of(self, user: str) -> Role:
        return self.policy.role_of(user, await self._groups_of(user))

    def known(self, user: str) -> Role | None:
        if not self._groups():
            return self.policy.role_of(user, frozenset())
        if self._fetched is None or self.clock() - self._fetched > GROUP_CACHE_SECONDS:
            return None
        return self.policy.role_of(user, self._member_of(user))
