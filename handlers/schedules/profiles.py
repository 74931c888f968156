"""The ``[schedules.NAME]`` tables: off-hours schedules by cluster label, in the spirit of
Cloud Custodian's offhours tag. A cluster labelled ``clusterbot-schedule: NAME`` is offered
the schedule NAME on a card."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, TypeAdapter, model_validator

from handlers.grammar import CommandError
from handlers.policy import Section
from handlers.schedules.times import Weekly, parse_weekly, parse_zone

LABEL_VALUE = re.compile(r"^[a-z0-9_-]{1,63}$")  # a Google Cloud label's value


class ScheduleProfile(BaseModel):
    """An off-hours schedule a cluster takes by its label ``clusterbot-schedule: NAME``."""

    model_config = ConfigDict(extra="forbid")

    off: str  # "Mon-Fri 20:00", as /cluster schedule takes it
    on: str
    tz: str = "UTC"

    @model_validator(mode="after")
    def _readable(self) -> ScheduleProfile:
        try:
            self.times()
        except CommandError as error:
            raise ValueError(error.reason) from None
        return self

    def times(self) -> tuple[Weekly, Weekly, str]:
        off = parse_weekly(self.off.split(), "schedule")
        on = parse_weekly(self.on.split(), "schedule")
        if off == on:
            raise CommandError("off and on are the same time", "schedule")
        return off, on, parse_zone(self.tz, "schedule")


def _label_values(value: dict[str, ScheduleProfile]) -> dict[str, ScheduleProfile]:
    for name in value:
        if not LABEL_VALUE.match(name):
            raise ValueError(
                f"schedule {name!r} cannot be a label's value: use up to 63 lowercase "
                "letters, digits, - and _"
            )
    return value


Profiles = dict[str, ScheduleProfile]

SCHEDULE_PROFILES: Section[Profiles] = Section(
    "schedules", TypeAdapter(Annotated[Profiles, AfterValidator(_label_values)]), dict
)
