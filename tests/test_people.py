"""Who each person is in Slurm: the policy's ``[people]`` table, and ``/cluster me``."""

from __future__ import annotations

from handlers.capabilities import REGISTRY
from handlers.policy import Policy
from tests.conftest import ManualClock
from tests.support.text_adapter import text
from tests.test_services_unit import POLICY, make_bot


async def test_me_says_who_you_run_jobs_as_or_how_to_be_known() -> None:
    people = Policy.model_validate({**POLICY, "people": {"U0ALICE": "alice_example_com"}})
    bot = make_bot(ManualClock(), people)
    said = text(await bot.ask("U0ALICE", "me"))
    assert "runs jobs as *alice_example_com* in Slurm" in said, said
    unknown = text(await bot.ask("U0BOB", "me"))
    assert "No Slurm user is known for" in unknown and '`U0BOB = "your-login"`' in unknown
    extra = text(await bot.ask("U0ALICE", "me please"))
    assert "/cluster me" in extra  # a word too many: the reason and the usage


def test_a_name_that_is_no_slurm_user_is_refused_with_the_policy() -> None:
    policy = Policy.model_validate({"people": {"U0ALICE": "Alice Smith", "U0BOB": "bob"}})
    problems = policy.problems(REGISTRY.sections.values())
    assert len(problems) == 1 and "'Alice Smith' is not a Slurm user name" in problems[0]
    fine = Policy.model_validate({"people": {"U0BOB": "bob.smith", "U0CAROL": "_svc-1"}})
    assert fine.problems(REGISTRY.sections.values()) == []
