"""Who each person is in Slurm: the policy's ``[people]`` table maps a chat member's id to
the Slurm user name their jobs run as (on Google Cloud with OS Login, the name OS Login
gives their account). ``/cluster me`` shows it; the idle allocations' owners are found by it.

    [people]
    U0ALICE = "alice"
    U0BOB = "bob_example_com"
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator, TypeAdapter

from handlers.commanding import Caller
from handlers.policy import Section
from handlers.replies import Code, Note, Reply, Strong, Text, UserRef

ME_USAGE = "/cluster me"
# a POSIX login name as useradd(8) takes it (and OS Login makes them): what Slurm runs jobs as
SLURM_USER = re.compile(r"^[a-z_][a-z0-9_.-]{0,31}$")


def _login(value: str) -> str:
    if not SLURM_USER.match(value):
        raise ValueError(f"{value!r} is not a Slurm user name (a lowercase login name)")
    return value


PEOPLE: Section[dict[str, str]] = Section(
    "people", TypeAdapter(dict[str, Annotated[str, AfterValidator(_login)]]), dict
)


@dataclass(frozen=True)
class Me:
    """``/cluster me``: takes no words."""


class SlurmPeople:
    """The ``[people]`` table, both ways: a member's Slurm user, a Slurm user's member."""

    def __init__(self, table: dict[str, str]) -> None:
        self.slurm_of = dict(table)
        self.member_of = {name: member for member, name in table.items()}

    def slurm_user(self, member: str) -> str | None:
        return self.slurm_of.get(member)

    def member(self, slurm_user: str) -> str | None:
        return self.member_of.get(slurm_user)

    async def me(self, _command: Me, caller: Caller) -> Reply:
        name = self.slurm_user(caller.user)
        if name is None:
            return Reply("No Slurm user is known for you").add(
                Text("No Slurm user is known for ", UserRef(caller.user), "."),
                Note(
                    "An admin adds you to the policy's ",
                    Code("[people]"),
                    " table (",
                    Code(f'{caller.user} = "your-login"'),
                    "), so that the jobs you run are yours here: your idle allocations, ",
                    "your jobs followed.",
                ),
            )
        return Reply(f"You are {name} in Slurm").add(
            Text(UserRef(caller.user), " runs jobs as ", Strong(name), " in Slurm."),
            Note("From the policy's ", Code("[people]"), " table."),
        )
