"""The off-hours schedule's form: ``/cluster schedule`` with words missing asks which pools,
when off, when on and in which zone, and checks each entry as the command would."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from handlers.domain.models import Cluster
from handlers.forms.asks import EVERY_POOL, FormAsk, guarded, on_a_pool
from handlers.forms.choices import Forms
from handlers.forms.model import Ask, Choice, Form, FormField, FormState
from handlers.forms.spec import Checked, Filled, FormKindSpec
from handlers.forms.views import ASK, cluster_field
from handlers.grammar import CommandError
from handlers.replies import Note
from handlers.schedules.commands import AskSchedule
from handlers.schedules.times import CLOCK, parse_weekly, parse_zone, unquoted

SCHEDULE_KIND = "schedule"  # an off-hours schedule
SCHEDULE_TITLE = "Off-hours schedule"  # a modal title holds 24 characters
SCHEDULE_FIELDS = (
    ("off_days", "Off on (Mon-Fri, Sat,Sun, daily)", "Mon-Fri"),
    ("off_time", "Off at (HH:MM)", "20:00"),
    ("on_days", "Back on (Mon-Fri, Sat,Sun, daily)", "Mon-Fri"),
    ("on_time", "Back on at (HH:MM)", "08:00"),
)


@guarded
def schedule_ask(args: list[str]) -> FormAsk | None:
    """``schedule [CLUSTER [POOL]]``: the off and on times, and what is not given, in a
    form; ``schedule pause|resume|end ID`` and a schedule in words open none."""
    if args and args[0].lower() in ("pause", "resume", "end"):
        return None
    return on_a_pool(SCHEDULE_KIND, args)


class ScheduleForm(FormKindSpec):
    kind = SCHEDULE_KIND
    subcommand = "schedule"
    title = SCHEDULE_TITLE
    last = "tz"
    clickable = True
    texts = (*(name for name, _, _ in SCHEDULE_FIELDS), "tz")

    def blank(self, state: FormState) -> Form:
        return schedule_form(state, None)

    def drawn(self, forms: Forms, filled: Filled) -> Form:
        chosen, pools = forms.cluster_choice(filled.cluster), schedule_pools(forms, filled.cluster)
        return schedule_form(filled.state, chosen, pools, filled.choice("pool"))

    def command(self, forms: Forms, filled: Filled) -> Checked:
        texts = {name: filled.text(name) for name in self.texts}
        return check_schedule(filled.cluster, {**texts, "pool": filled.choice("pool")})


def schedule_pools(forms: Forms, cluster: Cluster) -> list[Choice]:
    """The pools a schedule can take to zero: the compute pools."""
    login = cluster.login_pool_id
    return [c for c in forms.pools(cluster) if c.value != login]


def check_schedule(
    cluster: Cluster, texts: Mapping[str, str | None]
) -> tuple[AskSchedule | None, dict[str, str]]:
    """The command, or the problems of the entries keyed by field."""
    errors: dict[str, str] = {}
    times = {}
    for name in ("off", "on"):
        words = [(texts.get(f"{name}_days") or "").strip(), (texts.get(f"{name}_time") or "")]
        try:
            times[name] = parse_weekly(unquoted([w for w in words if w.strip()]), "schedule")
        except CommandError as error:
            bad_time = not CLOCK.match((texts.get(f"{name}_time") or "").strip())
            errors[f"{name}_time" if bad_time else f"{name}_days"] = error.reason
    try:
        zone = parse_zone((texts.get("tz") or "").strip() or "UTC", "schedule")
    except CommandError as error:
        errors["tz"] = error.reason
    if errors:
        return None, errors
    if times["off"] == times["on"]:
        return None, {"on_time": "off and on are the same time"}
    pool = texts.get("pool")
    chosen = None if pool in (None, "", EVERY_POOL) else pool
    name = cluster.name or cluster.cluster_id
    return AskSchedule(name, chosen, times["off"], times["on"], zone), {}


def schedule_form(
    state: FormState,
    chosen: Choice | None,
    pools: Sequence[Choice] = (),
    pool: str | None = None,
    zone: str = "UTC",
    problems: Mapping[str, str] | None = None,
) -> Form:
    """The off-hours schedule: which pools, when off, when on, in which zone."""
    problems = problems or {}
    form = Form(state, SCHEDULE_TITLE, ASK).add(cluster_field(chosen))
    if chosen is None:
        return form.add(Note("Choose a cluster to put its compute pools on a schedule."))
    every = Choice(EVERY_POOL, "every compute pool")
    picked = pool if pool in {p.value for p in pools} else EVERY_POOL
    form.add(FormField("pool", "Node pools", Ask.CHOICE, choices=(every, *pools), initial=picked))
    for name, label, initial in SCHEDULE_FIELDS:
        form.add(
            FormField(
                name, label, Ask.LINE, initial=initial, max_length=32, problem=problems.get(name)
            )
        )
    form.add(
        FormField(
            "tz",
            "Time zone (as the tz database names it)",
            Ask.LINE,
            initial=zone,
            max_length=64,
            problem=problems.get("tz"),
        )
    )
    return form.add(
        Note(
            "The schedule is posted as a card with its next five nights and its saving; a "
            "second person approves it once. No night goes off under running jobs."
        )
    )
