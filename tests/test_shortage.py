"""Refusals for want of something, told apart as Google documents them and read from Vertex
AI's real replies: a quota used up is not retried and says which quota and where to raise it,
a stockout names the regions Google offers, a rate limit is waited out, and anything else
RESOURCE_EXHAUSTED says is shown as it is, never called a rate limit."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.vertex.retry import is_retryable, may_have_applied
from handlers.domain.errors import error_from_response, error_from_status
from handlers.domain.shortage import QUOTAS_PAGE, Shortage, shortage_of
from handlers.reading.clusters import error_text
from tests.support.demo_stack import Stack, demo_stack, text_of, thread_of

REAL = Path(__file__).parent / "fixtures" / "vertex"
INFO = "type.googleapis.com/google.rpc.ErrorInfo"


def _capture(name: str) -> dict[str, Any]:
    return dict(json.loads((REAL / f"{name}.json").read_text()))


def _http(body: dict[str, Any], status: int = 429) -> Any:
    return error_from_response(status, json.dumps(body).encode())


def _operation(name: str) -> Any:
    error = _capture(name)["body"]["error"]
    return error_from_status(error["code"], error["message"], error.get("details"))


def test_vertex_quota_refusal_as_a_429_is_final_and_names_its_quota() -> None:
    error = _http(_capture("http_429_quota_gpus")["body"])
    said = shortage_of(error)
    assert said is not None and said.kind == Shortage.QUOTA
    assert said.metrics == ("aiplatform.googleapis.com/custom_model_training_nvidia_l4_gpus",)
    assert not is_retryable(error, safe=True) and not is_retryable(error, safe=False)
    assert not may_have_applied(error)  # refused on purpose: nothing to look up
    text = error_text(error, "resize train01")
    assert "custom_model_training_nvidia_l4_gpus" in text and QUOTAS_PAGE in text
    assert "another machine type or region" in text
    assert "try again in a minute" not in text and "rate limit" not in text


def test_vertex_quota_failure_of_an_operation_is_read_the_same() -> None:
    error = _operation("lro_code8_quota")
    said = shortage_of(error)
    assert said is not None and said.kind == Shortage.QUOTA
    assert said.metrics == ("aiplatform.googleapis.com/custom_model_training_nvidia_k80_gpus",)


def test_a_stockout_names_where_capacity_is() -> None:
    error = _operation("lro_code8_stockout_errorinfo")
    said = shortage_of(error)
    assert said is not None and said.kind == Shortage.STOCKOUT
    assert (said.region, said.elsewhere) == ("us-central1", ("us-east4", "europe-west4"))
    assert not is_retryable(error, safe=False)
    text = error_text(error, "resize train01")
    assert "no capacity for these machines in us-central1 now; it offers us-east4, " in text


def _exhausted(*details: dict[str, Any], status: str = "RESOURCE_EXHAUSTED") -> Any:
    body = {"error": {"status": status, "message": "refused", "details": list(details)}}
    return _http(body, 429 if status == "RESOURCE_EXHAUSTED" else 503)


def test_documented_error_reasons_are_read_from_their_details() -> None:
    metadata = {"quota_metric": "compute.googleapis.com/vms", "quota_limit": "VMsPerProject"}
    quota = {"@type": INFO, "reason": "RESOURCE_QUOTA_EXCEEDED", "metadata": metadata}
    said = shortage_of(_exhausted(quota)) or _none()
    assert (said.kind, said.metrics) == (Shortage.QUOTA, ("compute.googleapis.com/vms",))
    violations = [{"subject": "project:1", "quotaMetric": "gpus"}]
    failure = {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": violations}
    assert (shortage_of(_exhausted(failure)) or _none()).metrics == ("gpus",)
    pool = {"@type": INFO, "reason": "ZONE_RESOURCE_POOL_EXHAUSTED", "metadata": {"zone": "b"}}
    zone = _exhausted(pool, status="UNAVAILABLE")
    assert (shortage_of(zone) or _none()).kind == Shortage.STOCKOUT
    assert not is_retryable(zone, safe=True)  # UNAVAILABLE, but no capacity: not retried
    assert shortage_of(_exhausted(status="UNAVAILABLE")) is None


def _none() -> Any:
    raise AssertionError("no shortage read")


def test_a_rate_limit_is_waited_out_and_an_unexplained_one_is_not_guessed() -> None:
    info = {"@type": INFO, "reason": "RATE_LIMIT_EXCEEDED", "domain": "googleapis.com"}
    rate = _http({"error": {"status": "RESOURCE_EXHAUSTED", "message": "slow", "details": [info]}})
    assert (shortage_of(rate) or _none()).kind == Shortage.RATE
    assert is_retryable(rate, safe=True)
    assert "rate limiting; try again in a minute" in error_text(rate, "list")
    bare = _http({"error": {"status": "RESOURCE_EXHAUSTED", "message": "Resource exhausted"}})
    assert (shortage_of(bare) or _none()).kind == Shortage.UNKNOWN
    text = error_text(bare, "list")
    assert "Resource exhausted (RESOURCE_EXHAUSTED)" in text
    assert "without saying what" in text and "rate limiting" not in text
    assert shortage_of(_http({"error": {"status": "NOT_FOUND", "message": "x"}}, 404)) is None


def test_the_internal_failure_of_an_operation_is_no_shortage() -> None:
    assert shortage_of(_operation("lro_code13_internal")) is None


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    async with demo_stack(tmp_path) as running:
        yield running


async def test_a_resize_refused_for_quota_is_sent_once_and_says_what_to_do(stack: Stack) -> None:
    refusal = _capture("http_429_quota_gpus")["body"]["error"]
    await stack.fault(method="PATCH", status=429, message=refusal["message"])
    card = await stack.card("alice", "/cluster resize train01 a4 3")
    await stack.click("bob", card["ts"], "approve")
    messages = await stack.wait(
        lambda ms: any(m["ts"] == card["ts"] and "Not applied" in text_of(m) for m in ms)
    )
    text = text_of(next(m for m in messages if m["ts"] == card["ts"]))
    assert "custom_model_training_nvidia_l4_gpus" in text and QUOTAS_PAGE in text
    assert "try again in a minute" not in text
    assert len(await stack.requests("PATCH")) == 1  # no retry storm


async def test_a_resize_that_ends_in_a_stockout_names_the_regions_offered(stack: Stack) -> None:
    error = _capture("lro_code8_stockout_errorinfo")["body"]["error"]
    await stack.fault(method="PATCH", operation_error=error)
    card = await stack.card("alice", "/cluster resize train01 a4 3")
    await stack.click("bob", card["ts"], "approve")
    messages = await stack.wait(
        lambda ms: any("failed after" in t for t in thread_of(ms, card)), limit=20
    )
    failure = next(t for t in thread_of(messages, card) if "failed after" in t)
    assert "Resources are insufficient in region: us-central1 (RESOURCE_EXHAUSTED)" in failure
    assert "it offers us-east4, europe-west4" in failure
