"""The ``[health]`` table: where a cluster's health alerts go (``[health.channels]``: a
cluster id, or a pattern with ``*``, to a channel; the others go to the alert channel)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from handlers.policy import Section, first_match


class HealthPolicy(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # a cluster id, or a pattern with ``*``, -> the channel its health alerts go to
    channels: dict[str, str] = Field(default_factory=dict)

    def channel_for(self, cluster_id: str) -> str | None:
        """The channel the policy names for the cluster's health alerts, or None."""
        return first_match(self.channels, cluster_id)


HEALTH_TABLE: Section[HealthPolicy] = Section("health", TypeAdapter(HealthPolicy), HealthPolicy)
