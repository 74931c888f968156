"""A form's life, whatever draws it: the form a command opens, the form once its cluster is
read, the form again after a live field changed, and a submission turned into the same
request as the typed command (or the problems, by field)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from handlers.dispatch import Dispatcher, Outcome
from handlers.domain.errors import VertexError
from handlers.domain.models import Cluster
from handlers.errors import UserError
from handlers.forms.asks import FormAsk
from handlers.forms.choices import Forms
from handlers.forms.model import Entries, Entry, Form, FormState
from handlers.forms.spec import NOTHING, Filled
from handlers.grammar import CommandError


def state_of(ask: FormAsk, channel: str) -> FormState:
    """The state of the form a command asked for."""
    state = FormState(ask.kind, channel, ask.cluster, ask.which)
    if ask.replace:
        state.place = f"replace:{ask.replace}"
    elif ask.place:
        state.place = f"add:{ask.place}"
    return state


class FormFlow:
    def __init__(self, forms: Forms, dispatcher: Dispatcher, home_channel: str | None) -> None:
        self.forms = forms
        self.dispatcher = dispatcher
        self.home_channel = home_channel  # where a form opened from the Home tab posts
        self.kinds = dispatcher.registry.forms  # every capability's forms, by kind

    def first(self, state: FormState) -> Form:
        """The form as it opens, at once: a cluster named in the command is read after."""
        spec = self.kinds[state.kind]
        if state.cluster:
            return spec.loading(state, f"Looking up {state.cluster}…")
        return spec.blank(state)

    async def filled(self, state: FormState, pool: str | None) -> Form:
        """The form for a cluster named in the command, once the cluster is read."""
        try:
            cluster = await self.forms.cluster(state.cluster or "", state.kind)
            state.cluster = cluster.name
            return self.drawn(state, cluster, {"pool": Entry(choice=pool)})
        except CommandError as error:
            return self._unfound(state, error.reason)
        except VertexError as error:
            return self._unfound(state, error.user_message)

    def _unfound(self, state: FormState, why: str) -> Form:
        """The form again without the cluster the command named, saying why."""
        state.cluster = None
        return self.kinds[state.kind].unfound(state, why)

    async def changed(self, state: FormState, entries: Entries) -> Form | None:
        """The form after a live field changed; None when there is nothing to redraw."""
        key = entries.get("cluster", NOTHING).choice
        if not key:
            return None
        try:
            cluster = await self.forms.cluster(key, state.kind)
        except UserError:
            return None
        state.cluster = cluster.name
        return self.drawn(state, cluster, entries)

    def drawn(self, state: FormState, cluster: Cluster, entries: Entries) -> Form:
        return self.kinds[state.kind].drawn(self.forms, Filled(state, cluster, entries))

    async def submitted(
        self, user: str, state: FormState, entries: Entries, files: Sequence[str] = ()
    ) -> dict[str, str]:
        """Make the request; what is wrong, by field name ({} when the request was made).
        ``files`` are the uploaded files' texts, read by the adapter."""
        last = self.dispatcher.registry.last_field(state.kind)
        try:
            key = entries.get("cluster", NOTHING).choice or state.cluster
            if not key:
                return {"cluster": "choose a cluster"}
            cluster = await self.forms.cluster(key, state.kind)
            command, errors = self._command(state, cluster, entries, files)
            if errors or command is None:
                return errors
            channel = state.channel or self.home_channel or ""
            name = self.kinds[state.kind].subcommand
            answer = await self.dispatcher.submit(user, channel, name, command)
        except CommandError as error:
            return {"cluster": error.reason}
        except VertexError as error:
            return {last: error.user_message[:150]}
        if answer.outcome == Outcome.OK:
            return {}
        return {last: (answer.reason or "the request was not made")[:300]}

    def _command(
        self, state: FormState, cluster: Cluster, entries: Entries, files: Sequence[str]
    ) -> tuple[Any, dict[str, str]]:
        return self.kinds[state.kind].command(self.forms, Filled(state, cluster, entries, files))
