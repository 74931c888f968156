"""What a kind of form is to the flow that runs it (``FormFlow``) and to the platform's
adapter: a ``FormKindSpec`` says how the form opens with no cluster, how it is drawn once its
cluster is read (and again after a live field changed), and how a submission becomes the
typed command its subcommand would have parsed, or the problems by field. Each kind is one
subclass, listed once in ``handlers/forms/kinds.py``'s ``FORMS``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from handlers.domain.models import Cluster
from handlers.forms.choices import Forms
from handlers.forms.model import Entries, Entry, Form, FormState
from handlers.forms.views import loading_form

NOTHING = Entry()
Checked = tuple[Any, dict[str, str]]  # the typed command, or None and the problems by field


@dataclass(frozen=True)
class Filled:
    """A form on its cluster: what it is about, the cluster read, and what was entered
    (``files``: the uploaded files' texts, read by the adapter)."""

    state: FormState
    cluster: Cluster
    entries: Entries
    files: Sequence[str] = ()

    def text(self, name: str) -> str | None:
        return self.entries.get(name, NOTHING).text

    def choice(self, name: str) -> str | None:
        return self.entries.get(name, NOTHING).choice


class FormKindSpec:
    """One kind of form. ``last`` is the field where a problem that belongs to no field of
    the form is shown; ``clickable`` says a button may open it with nothing typed (the Home
    tab, a digest's opportunity)."""

    kind: ClassVar[str]
    subcommand: ClassVar[str]
    title: ClassVar[str]
    last: ClassVar[str] = "cluster"
    clickable: ClassVar[bool] = False

    def title_of(self, state: FormState) -> str:
        return self.title

    def loading(self, state: FormState, note: str) -> Form:
        """The form while its cluster is read: no fields yet, so nothing to submit."""
        return loading_form(state, self.title_of(state), note)

    def blank(self, state: FormState) -> Form:
        """The form as it opens with no cluster named."""
        return self.loading(state, "Close this and name a cluster.")

    def unfound(self, state: FormState, why: str) -> Form:
        """The form again without the cluster its command named, saying why."""
        return self.loading(state, f"{why}. Close this and try again.")

    def drawn(self, forms: Forms, filled: Filled) -> Form:
        raise NotImplementedError

    def command(self, forms: Forms, filled: Filled) -> Checked:
        raise NotImplementedError
