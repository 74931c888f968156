"""The forms of resize, delete, a slurm.conf key, a script and a schedule (a kind of form:
``handlers/forms/spec.py``); each is declared by its capability (``Capability.forms``), and
``FormFlow`` and the platform's adapter run any kind from the registry without knowing
which it is."""

from __future__ import annotations

from handlers.forms.asks import FormKind
from handlers.forms.choices import Forms, check_setting, setting_choices
from handlers.forms.model import Form, FormState
from handlers.forms.spec import NOTHING, Checked, Filled, FormKindSpec
from handlers.forms.views import (
    DELETE_TITLE,
    RESIZE_TITLE,
    SETTING_TITLE,
    delete_form,
    resize_form,
    script_form,
    setting_form,
)
from handlers.slurm.scripts import scripts_of


class ResizeForm(FormKindSpec):
    kind = FormKind.RESIZE
    subcommand = "resize"
    title = RESIZE_TITLE
    last = "max"
    clickable = True

    def blank(self, state: FormState) -> Form:
        return resize_form(state, None)

    def unfound(self, state: FormState, why: str) -> Form:
        return resize_form(state, None, note=why)

    def drawn(self, forms: Forms, filled: Filled) -> Form:
        cluster, chosen = filled.cluster, forms.cluster_choice(filled.cluster)
        pool_id = filled.choice("pool")
        pool = cluster.pool(pool_id) if pool_id else None
        if pool is None:
            return resize_form(filled.state, chosen, forms.pools(cluster))
        # counts typed for another pool (the pool just changed) start afresh at this one's
        low_text, high_text = (
            typed.text if typed.scope == pool.id else None
            for typed in (filled.entries.get(n, NOTHING) for n in ("min", "max"))
        )
        estimate, problems = forms.typed_resize(cluster, pool.id, low_text, high_text)
        return resize_form(
            filled.state,
            chosen,
            forms.pools(cluster),
            pool.id,
            (pool.min_nodes, pool.max_nodes),
            estimate,
            problems=problems,
        )

    def command(self, forms: Forms, filled: Filled) -> Checked:
        low, high = filled.text("min"), filled.text("max")
        return forms.check_resize(filled.cluster, filled.choice("pool"), low, high)


class DeleteForm(FormKindSpec):
    kind = FormKind.DELETE
    subcommand = "delete"
    title = DELETE_TITLE
    last = "confirm"
    clickable = True

    def blank(self, state: FormState) -> Form:
        return delete_form(state, None)

    def drawn(self, forms: Forms, filled: Filled) -> Form:
        cluster = filled.cluster
        chosen = forms.cluster_choice(cluster)
        return delete_form(filled.state, chosen, cluster.cluster_id, forms.deletes(cluster))

    def command(self, forms: Forms, filled: Filled) -> Checked:
        return forms.check_delete(filled.cluster, filled.text("confirm"))


class SettingForm(FormKindSpec):
    kind = FormKind.SETTING
    subcommand = "slurm"
    title = SETTING_TITLE
    last = "value"

    def drawn(self, forms: Forms, filled: Filled) -> Form:
        cluster = filled.cluster
        return setting_form(filled.state, cluster.cluster_id, setting_choices(cluster))

    def command(self, forms: Forms, filled: Filled) -> Checked:
        return check_setting(filled.cluster, filled.choice("key"), filled.text("value"))


class ScriptForm(FormKindSpec):
    kind = FormKind.SCRIPT
    subcommand = "slurm"
    title = "Add a script"
    last = "place"

    def title_of(self, state: FormState) -> str:
        return f"Add a {state.which or 'prolog'} script"

    def drawn(self, forms: Forms, filled: Filled) -> Form:
        cluster, which = filled.cluster, filled.state.which or "prolog"
        heads = [(s.splitlines() or [""])[0] for s in scripts_of(cluster, which)]
        places = forms.places(cluster, which)
        return script_form(filled.state, cluster.cluster_id, places, heads)

    def command(self, forms: Forms, filled: Filled) -> Checked:
        which = filled.state.which or "prolog"
        place, pasted = filled.choice("place"), filled.text("paste")
        return forms.check_script(filled.cluster, which, place, pasted, filled.files)
