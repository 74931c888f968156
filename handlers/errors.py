"""The one kind of error a person may see. Its message (``said``) is one line meant for the
person who asked, shown as it is; every other exception is an internal error, logged with a
reference that is all the person sees. Commands, clicks, form submissions and the pipeline
API catch it in one place each (``handlers/dispatch.py``, ``bot/release_api.py``)."""

from __future__ import annotations

from enum import StrEnum


class Blame(StrEnum):
    """Whose the trouble is, for the metrics: the words asked, or the world answering."""

    INPUT = "bad_input"
    UPSTREAM = "upstream_error"
    BUSY = "busy"  # asked while clusterbot did as much of it as it may


class UserError(Exception):
    """An error whose message is meant for a person."""

    blame = Blame.INPUT
    shows_usage = False  # the subcommand's usage is shown under it (the words were at fault)

    @property
    def said(self) -> str:
        """The line the person reads."""
        return str(self.args[0]) if self.args else type(self).__name__
