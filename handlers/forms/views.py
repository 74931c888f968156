"""What each form shows: resize, delete, a slurm.conf setting, a prolog or epilog script,
and a form whose cluster is still being read. Fields whose change alters the form (the
cluster, the pool, the node counts) are ``live``; a count's ``scope`` is its pool, so
choosing another pool starts the counts afresh at that pool's own."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from handlers.forms.choices import Estimate
from handlers.forms.model import Ask, Choice, Form, FormField, FormState
from handlers.replies import Code, Field, Fields, Line, Note, Strong, Text

RESIZE_TITLE = "Resize a node pool"
DELETE_TITLE = "Delete a cluster"
SETTING_TITLE = "Change a Slurm setting"
ASK = "Ask for approval"
SCRIPT_TEXT_LIMIT = 3000  # what a pasted script may hold; a longer one is uploaded


def cluster_field(chosen: Choice | None) -> FormField:
    return FormField(
        "cluster",
        "Cluster",
        Ask.FIND,
        choices=(chosen,) if chosen is not None else (),
        initial=chosen.value if chosen is not None else None,
        live=True,
        placeholder="Type to find a cluster",
    )


def resize_form(
    state: FormState,
    chosen: Choice | None,
    pools: Sequence[Choice] = (),
    pool: str | None = None,
    current: tuple[int, int] | None = None,
    estimate: Estimate | None = None,
    note: str = "",
    problems: Mapping[str, str] | None = None,
) -> Form:
    """The resize form; ``problems`` (by field: min, max) are shown under their field while
    the counts are typed, before any submission."""
    problems = problems or {}
    form = Form(state, RESIZE_TITLE, ASK).add(cluster_field(chosen))
    if chosen is None or not pools:
        return form.add(Note(note or "Choose a cluster to see its node pools and their cost."))
    picked = next((p for p in pools if p.value == pool), None)
    form.add(
        FormField(
            "pool",
            "Node pool",
            Ask.CHOICE,
            choices=tuple(pools),
            initial=picked.value if picked is not None else None,
            live=True,
            placeholder="Choose a pool",
        )
    )
    if picked is None:
        return form.add(Note(note or "Choose a pool to set its node counts."))
    low, high = current or (None, None)
    form.add(
        _count("min", "Min nodes", low, picked.value, problems, optional=False),
        _count(
            "max",
            "Max nodes (more than min: Slurm scales with the queue)",
            high,
            picked.value,
            problems,
            optional=True,
        ),
    )
    if estimate is not None:
        form.add(
            Fields(
                (
                    Field("Cost now", estimate.before),
                    Field("After", estimate.after),
                    Field("Change", estimate.change[:1900]),
                )
            )
        )
    return form.add(
        Note("The request is posted as a card in the channel; a second person approves it.")
    )


def _count(
    name: str,
    label: str,
    initial: int | None,
    pool: str,
    problems: Mapping[str, str],
    *,
    optional: bool,
) -> FormField:
    # No bounds on the field: a platform's client would refuse a count outside them in words
    # of its own and the bot would never hear of it; the form's own check says it at the
    # field as it is typed, in the words the submission uses.
    return FormField(
        name,
        label,
        Ask.COUNT,
        initial=str(initial) if initial is not None else None,
        optional=optional,
        live=True,
        scope=pool,
        problem=problems.get(name),
    )


def delete_form(
    state: FormState, chosen: Choice | None, cluster_id: str = "", summary: Line = ()
) -> Form:
    form = Form(state, DELETE_TITLE, "Ask to delete").add(cluster_field(chosen))
    if chosen is None:
        return form.add(Note("Choose the cluster to delete."))
    if summary:
        form.add(Text(*summary))
    return form.add(
        FormField("confirm", f"Type {cluster_id} to confirm", Ask.LINE, max_length=100),
        Note(
            "An approver must approve the request on its card before anything is deleted; "
            "the cluster's spec is kept so it can be restored."
        ),
    )


def script_form(
    state: FormState, cluster_id: str, places: Sequence[Choice], scripts: Sequence[str]
) -> Form:
    which = state.which or "prolog"
    verb, _, number = (state.place or "").partition(":")
    title = f"Replace {which} {number}" if verb == "replace" else f"Add a {which} script"
    listing: list[str | Code] = []
    for n, line in enumerate(scripts, 1):
        listing += [f"\n{n}. ", Code(line[:80])]
    said = (":", *listing) if scripts else (".",)
    preset = next((p for p in places if p.value == state.place), places[0] if places else None)
    when = "before" if which == "prolog" else "after"
    return Form(state, title, ASK).add(
        Text(Strong(cluster_id), f" has {len(scripts)} {which} scripts", *said),
        FormField(
            "place",
            "Where",
            Ask.CHOICE,
            choices=tuple(places),
            initial=preset.value if preset is not None else None,
            placeholder="Choose where it goes",
        ),
        FormField(
            "paste",
            "Paste the script",
            Ask.LONG_TEXT,
            optional=True,
            max_length=SCRIPT_TEXT_LIMIT,
            hint="Up to 3,000 characters; for a longer one, upload it as a file.",
        ),
        FormField(
            "file", "…or upload it", Ask.FILE, optional=True, file_types=("sh", "bash", "txt")
        ),
        Note(
            f"It runs {when} every job. The request is posted as a card with the script's "
            "hash; a second person approves it."
        ),
    )


def setting_form(state: FormState, cluster_id: str, choices: Sequence[Choice]) -> Form:
    return Form(state, SETTING_TITLE, ASK).add(
        Text("slurm.conf of ", Strong(cluster_id)),
        FormField(
            "key", "Setting", Ask.CHOICE, choices=tuple(choices), placeholder="Choose a setting"
        ),
        FormField(
            "value",
            "Value",
            Ask.LINE,
            max_length=500,
            hint="Known keys are checked and explained on the card.",
        ),
        Note("The whole config map is sent with the new value; a second person approves."),
    )


def loading_form(state: FormState, title: str, note: str) -> Form:
    """A form whose cluster is being read; it has no fields yet, so nothing to submit."""
    return Form(state, title, None).add(Note(note))
