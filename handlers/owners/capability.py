"""People and their jobs, declared: who each person is in Slurm (``[people]``, ``/cluster
me``), so that what their jobs do can be told to them."""

from __future__ import annotations

from handlers.capability import Capability, Kernel
from handlers.commanding import Subcommand, nothing
from handlers.owners.people import ME_USAGE, PEOPLE, Me, SlurmPeople
from handlers.policy import Role


def build(kernel: Kernel) -> SlurmPeople:
    return SlurmPeople(kernel.policy.section(PEOPLE))


OWNERS = Capability(
    "owners",
    build,
    commands=(
        Subcommand(
            "me",
            ME_USAGE,
            "who you are in Slurm: the user your jobs run as",
            Role.VIEWER,
            nothing(ME_USAGE, Me),
            lambda people, command, caller: people.me(command, caller),
            instant=True,
        ),
    ),
    policy=(PEOPLE,),
)
