"""People and groups as Slack names them: user ids (W for Enterprise Grid), user group ids,
and the mention a slash command's text carries when the command escapes users
(https://api.slack.com/interactivity/slash-commands#creating_commands: ``<@U012AB3CD|name>``).
"""

from __future__ import annotations

import re

USER_ID = r"[UW][A-Z0-9]{2,}"
SLACK_USER = re.compile(f"^{USER_ID}$")
MENTION = re.compile(f"^<@({USER_ID})(\\|[^>]*)?>$|^({USER_ID})$")  # a mention or a user id
GROUP = re.compile(r"^S[A-Z0-9]{2,}$")  # a user group (usergroups.list: "id": "S0614TZR7")


class SlackPeople:
    """The core's ``People`` port for Slack."""

    def is_person(self, principal: str) -> bool:
        return SLACK_USER.match(principal) is not None

    def named(self, word: str) -> str | None:
        found = MENTION.match(word)
        return None if found is None else found.group(1) or found.group(3)

    def is_group(self, member: str) -> bool:
        return GROUP.match(member) is not None


SLACK_PEOPLE = SlackPeople()
