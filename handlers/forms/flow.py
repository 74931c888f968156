"""A form's life, whatever draws it: the form a command opens, the form once its cluster is
read, the form again after a live field changed, and a submission turned into the same
request as the typed command (or the problems, by field)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.vertex.errors import VertexError
from bot.vertex.models import Cluster
from handlers.dispatch import Dispatcher, Outcome
from handlers.forms.asks import FormAsk, FormKind
from handlers.forms.choices import Forms, check_setting, setting_choices
from handlers.forms.model import Entries, Entry, Form, FormState
from handlers.forms.views import (
    SCHEDULE_FIELDS,
    delete_form,
    loading_form,
    resize_form,
    schedule_form,
    script_form,
    setting_form,
)
from handlers.grammar import CommandError
from handlers.slurm.scripts import scripts_of

# Where a problem that belongs to no field of the form is shown: its last field.
LAST_FIELD = {
    FormKind.RESIZE: "max",
    FormKind.DELETE: "confirm",
    FormKind.SCRIPT: "place",
    FormKind.SETTING: "value",
    FormKind.SCHEDULE: "tz",
}
NOTHING = Entry()
SCHEDULE_ENTRIES = (*(name for name, _, _ in SCHEDULE_FIELDS), "tz")


def state_of(ask: FormAsk, channel: str) -> FormState:
    """The state of the form a command asked for."""
    state = FormState(ask.kind, channel, ask.cluster, ask.which)
    if ask.replace:
        state.place = f"replace:{ask.replace}"
    elif ask.place:
        state.place = f"add:{ask.place}"
    return state


def last_field(kind: str) -> str:
    return LAST_FIELD.get(kind, "cluster")


class FormFlow:
    def __init__(self, forms: Forms, dispatcher: Dispatcher, home_channel: str | None) -> None:
        self.forms = forms
        self.dispatcher = dispatcher
        self.home_channel = home_channel  # where a form opened from the Home tab posts

    @staticmethod
    def first(state: FormState) -> Form:
        """The form as it opens, at once: a cluster named in the command is read after."""
        if state.cluster:
            return loading_form(state, f"Looking up {state.cluster}…")
        if state.kind == FormKind.DELETE:
            return delete_form(state, None)
        if state.kind == FormKind.SCHEDULE:
            return schedule_form(state, None)
        return resize_form(state, None)

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

    @staticmethod
    def _unfound(state: FormState, why: str) -> Form:
        """The form again without the cluster the command named, saying why."""
        state.cluster = None
        if state.kind == FormKind.RESIZE:
            return resize_form(state, None, note=why)
        return loading_form(state, f"{why}. Close this and try again.")

    async def changed(self, state: FormState, entries: Entries) -> Form | None:
        """The form after a live field changed; None when there is nothing to redraw."""
        key = entries.get("cluster", NOTHING).choice
        if not key:
            return None
        try:
            cluster = await self.forms.cluster(key, state.kind)
        except (CommandError, VertexError):
            return None
        state.cluster = cluster.name
        return self.drawn(state, cluster, entries)

    def drawn(self, state: FormState, cluster: Cluster, entries: Entries) -> Form:
        forms = self.forms
        chosen = forms.cluster_choice(cluster)
        if state.kind == FormKind.DELETE:
            return delete_form(state, chosen, cluster.cluster_id, forms.deletes(cluster))
        if state.kind == FormKind.SETTING:
            return setting_form(state, cluster.cluster_id, setting_choices(cluster))
        if state.kind == FormKind.SCHEDULE:
            picked = entries.get("pool", NOTHING).choice
            return schedule_form(state, chosen, forms.schedule_pools(cluster), picked)
        if state.kind == FormKind.SCRIPT:
            which = state.which or "prolog"
            heads = [(s.splitlines() or [""])[0] for s in scripts_of(cluster, which)]
            return script_form(state, cluster.cluster_id, forms.places(cluster, which), heads)
        pool_id = entries.get("pool", NOTHING).choice
        pool = cluster.pool(pool_id) if pool_id else None
        if pool is None:
            return resize_form(state, chosen, forms.pools(cluster))
        # counts typed for another pool (the pool just changed) start afresh at this one's
        low_text, high_text = (
            entry.text if entry.scope == pool.id else None
            for entry in (entries.get("min", NOTHING), entries.get("max", NOTHING))
        )
        estimate, problems = forms.typed_resize(cluster, pool.id, low_text, high_text)
        return resize_form(
            state,
            chosen,
            forms.pools(cluster),
            pool.id,
            (pool.min_nodes, pool.max_nodes),
            estimate,
            problems=problems,
        )

    async def submitted(
        self, user: str, state: FormState, entries: Entries, files: Sequence[str] = ()
    ) -> dict[str, str]:
        """Make the request; what is wrong, by field name ({} when the request was made).
        ``files`` are the uploaded files' texts, read by the adapter."""
        last = last_field(state.kind)
        try:
            key = entries.get("cluster", NOTHING).choice or state.cluster
            if not key:
                return {"cluster": "choose a cluster"}
            cluster = await self.forms.cluster(key, state.kind)
            command, errors = self._command(state, cluster, entries, files)
            if errors or command is None:
                return errors
            channel = state.channel or self.home_channel or ""
            name = FormAsk(state.kind).subcommand
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
        def entry(name: str) -> Entry:
            return entries.get(name, NOTHING)

        if state.kind == FormKind.DELETE:
            return self.forms.check_delete(cluster, entry("confirm").text)
        if state.kind == FormKind.SETTING:
            return check_setting(cluster, entry("key").choice, entry("value").text)
        if state.kind == FormKind.SCHEDULE:
            texts = {name: entry(name).text for name in SCHEDULE_ENTRIES}
            return self.forms.check_schedule(cluster, {**texts, "pool": entry("pool").choice})
        if state.kind == FormKind.SCRIPT:
            which = state.which or "prolog"
            place, pasted = entry("place").choice, entry("paste").text
            return self.forms.check_script(cluster, which, place, pasted, files)
        return self.forms.check_resize(
            cluster, entry("pool").choice, entry("min").text, entry("max").text
        )
