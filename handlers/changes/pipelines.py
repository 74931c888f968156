"""The release hook's ``[pipelines]`` table: its only callers, each a Google identity (a
service account's email) or a pattern with ``*`` such as ``*@ci.iam.gserviceaccount.com``,
with the actions it may take without an approver (a list), or
``{pre_approved = [...], ask = [...]}``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter

from handlers.policy import Section, first_match

ReleaseAction = Literal["scale-to-zero", "delete"]  # what a pipeline's release may do


class PipelineCaller(BaseModel):
    """What one caller of the release hook may ask: ``pre_approved`` actions are taken when
    the queue drains, ``ask`` actions become an approval card."""

    model_config = ConfigDict(extra="forbid")

    pre_approved: list[ReleaseAction] = Field(default_factory=list)
    ask: list[ReleaseAction] = Field(default_factory=list)

    def may(self, action: str) -> bool:
        return action in self.pre_approved or action in self.ask


def _callers(value: Any) -> Any:
    """A caller's list is its pre-approved actions."""
    if not isinstance(value, dict):
        return value
    return {k: {"pre_approved": v} if isinstance(v, list) else v for k, v in value.items()}


Callers = dict[str, PipelineCaller]

PIPELINES: Section[Callers] = Section(
    "pipelines", TypeAdapter(Annotated[Callers, BeforeValidator(_callers)]), dict
)


def caller_of(callers: Callers, email: str) -> PipelineCaller | None:
    """The caller's entry: its own, else the first pattern it matches (an email in any
    case); None: not a caller."""
    return first_match(callers, email, fold=str.lower)
