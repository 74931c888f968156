"""The demo as a new user meets it: in the browser, alice asks, bob approves, progress to done."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from bot.sandbox.controlplane import Durations
from handlers.spend.capability import DIGEST
from tests.conftest import require
from tests.support.browser import ARTIFACTS, chromium, chromium_available, open_sandbox
from tests.support.demo_stack import demo_stack

pytestmark = pytest.mark.browser
DOCS = Path(__file__).resolve().parent.parent / "docs"


async def keep_screenshot(page: Page, name: str) -> None:
    """A screenshot among the test artifacts, and in docs/ for the README on request."""
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / name))
    if os.environ.get("CLUSTERBOT_UPDATE_SCREENSHOTS") == "1":  # make screenshots
        await page.screenshot(path=str(DOCS / name))


async def run(page: Page, text: str) -> None:
    await page.fill("#composer-input", text)
    await page.press("#composer-input", "Enter")


async def test_resize_approved_in_the_browser(tmp_path: Path) -> None:
    require(chromium_available(), "Chromium (/usr/bin/chromium)")
    durations = Durations(create=5, update=6, delete=5)
    async with demo_stack(tmp_path, durations=durations) as stack, chromium() as browser:
        page, errors = await open_sandbox(browser, stack.url)

        await page.select_option("#user-picker", "U0ALICE")
        await run(page, "/cluster help")  # answered in the ack's own body
        await expect(page.locator(".message.ephemeral").last).to_contain_text("/cluster resize")
        await run(page, "/cluster list")
        await expect(page.locator(".message.ephemeral").last).to_contain_text("train01")

        await run(page, "/cluster resize train01 a4 3")
        header = page.locator(
            ".message", has=page.locator(".block-header", has_text="Resize request")
        )
        await expect(header).to_be_visible()
        ts = await header.get_attribute("data-ts")
        card = page.locator(f'#messages .message[data-ts="{ts}"]')
        await expect(card).to_contain_text("2 -> 3")
        await expect(card).to_contain_text("~+$106.00/h")

        await page.select_option("#user-picker", "U0BOB")
        await card.locator("button", has_text="Approve").click()
        await expect(card).to_contain_text("Approved by @bob")
        await expect(card.locator("button.replies")).to_be_visible()
        await card.locator("button.replies").click()
        thread = page.locator("#thread-messages")
        await expect(thread).to_contain_text("train01:", timeout=10_000)
        await expect(thread).to_contain_text("done, finished in", timeout=20_000)
        await expect(card).to_contain_text("Done: approved by @bob")
        assert errors == []
        await keep_screenshot(page, "demo.png")
        patches = await stack.requests("PATCH")
        assert len(patches) == 1


async def test_idle_alert_and_its_snooze_menu_in_the_browser(tmp_path: Path) -> None:
    require(chromium_available(), "Chromium (/usr/bin/chromium)")
    from handlers.policy import Policy

    policy = Policy.model_validate(
        {
            "roles": {"operator": ["U0ALICE"], "approver": ["U0BOB"]},
            "idle": {"idle_after_minutes": 0.005},
        }
    )
    async with (
        demo_stack(tmp_path, policy=policy, sweep_interval=0.5) as stack,
        chromium() as browser,
    ):
        page = await browser.new_page(viewport={"width": 1280, "height": 860})
        await page.goto(stack.url + "/")
        await page.select_option("#user-picker", "U0ALICE")
        alert = page.locator(
            "#messages .message", has=page.locator(".block-header", has_text="Idle cluster: cpu01")
        )
        await expect(alert).to_be_visible(timeout=10_000)
        await expect(alert).to_contain_text("cpu: 4 x n2-standard-8")
        await expect(alert.locator("button")).to_have_text(
            ["Scale to zero", "Ask to delete", "Keep"]
        )
        # cpu01's jobs: one held by its user, one waiting for a reservation that starts
        # tomorrow; neither is demand, and the alert says why of each
        await expect(alert).to_contain_text("held by its user (JobHeldUser)")
        await expect(alert).to_contain_text("scontrol release")
        await expect(alert).to_contain_text(
            "1 job of erin waiting for its reservation quarter-end, which starts"
        )
        await keep_screenshot(page, "idle-alert.png")
        ts = await alert.get_attribute("data-ts")
        menu = page.locator(f'#messages .message[data-ts="{ts}"] select.menu')
        await menu.select_option(label="8 hours")
        answered = page.locator(f'#messages .message[data-ts="{ts}"]')
        await expect(answered).to_contain_text("Snoozed by @alice for 8 h")
        await expect(answered.locator("select")).to_have_count(0)  # the menu is gone
        await expect(answered.locator("button")).to_have_text(["Un-snooze"])
        await answered.locator("button", has_text="Un-snooze").click()
        await expect(answered).to_contain_text("Un-snoozed by @alice: watched again")
        await expect(answered.locator("button")).to_have_count(0)


async def test_the_job_queue_in_the_browser(tmp_path: Path) -> None:
    require(chromium_available(), "Chromium (/usr/bin/chromium)")
    async with demo_stack(tmp_path) as stack, chromium() as browser:
        stack.simulator.set_jobs(
            "train01",
            {
                "jobs": [
                    {
                        "job_id": 4101,
                        "name": "llama-pretrain",
                        "user_name": "alice",
                        "account": "research",
                        "partition": "a4",
                        "job_state": "RUNNING",
                        "node_count": 2,
                        "priority": 4310,
                    },
                    {
                        "job_id": 4102,
                        "name": "eval-sweep",
                        "user_name": "bob",
                        "account": "eval",
                        "partition": "a4",
                        "job_state": "PENDING",
                        "state_reason": "Resources",
                        "node_count": 1,
                        "priority": 4120,
                    },
                    {
                        "job_id": 4103,
                        "name": "rlhf-7b",
                        "user_name": "alice",
                        "account": "research",
                        "partition": "a4",
                        "job_state": "PENDING",
                        "state_reason": "QOSMaxGRESPerUser",
                        "node_count": 1,
                        "priority": 3980,
                    },
                    {
                        "job_id": 4104,
                        "name": "tokenize",
                        "user_name": "carol",
                        "account": "eval",
                        "partition": "a4",
                        "job_state": "PENDING",
                        "state_reason": "Dependency",
                        "node_count": 1,
                        "priority": 3500,
                    },
                ]
            },
        )
        page = await browser.new_page(viewport={"width": 1360, "height": 760})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        await page.goto(stack.url + "/")
        await expect(page.locator("#connection")).to_have_text("live")
        await page.select_option("#user-picker", "U0CAROL")
        await run(page, "/cluster jobs train01")
        reply = page.locator(".message.ephemeral").last
        await expect(reply).to_contain_text("1 running job, 3 pending.")
        await expect(reply).to_contain_text("QOSMaxGRESPerUser")
        await expect(reply).to_contain_text(
            "its user runs as much as its QOS's limit allows (GPUs or other GRES)"
        )
        assert errors == []
        await keep_screenshot(page, "jobs.png")


async def test_the_cost_chart_and_a_schedule_in_the_browser(tmp_path: Path) -> None:
    """The demo's week: its digest, the cost chart shown as a picture, the schedule that
    slept through the week, and a new one asked for, approved once, and its form."""
    require(chromium_available(), "Chromium (/usr/bin/chromium)")
    from bot.demo_history import seed_week

    async with demo_stack(tmp_path) as stack, chromium() as browser:
        assert await seed_week(stack.service) > 0
        assert stack.service.core.of(DIGEST) is not None
        # owed now and posted by this call or by the engine's own worker, whichever takes
        # it first: the page below waits for the digest itself
        await stack.service.core.of(DIGEST).fire(time.time())
        page, errors = await open_sandbox(browser, stack.url)
        await page.select_option("#user-picker", "U0CAROL")
        digest = page.locator(
            "#messages .message", has=page.locator(".block-header", has_text="Weekly cost digest")
        )
        await expect(digest).to_be_visible(timeout=20_000)
        await expect(digest).to_contain_text("The biggest opportunities")
        await expect(digest).to_contain_text("clusterbot saved ~$")

        await run(page, "/cluster cost since 7d")
        picture = page.locator("#messages img.file-image").last
        await expect(picture).to_be_visible()
        # the PNG drawn, decoded and shown (10 in at 100 dpi); retried, as the page redraws
        # its messages when others arrive
        await expect(picture).to_have_js_property("naturalWidth", 1000)
        await expect(page.locator("#messages a.file").last).to_contain_text("cost-all-clusters-7d")
        await keep_screenshot(page, "cost-chart.png")

        await run(page, "/cluster schedules")
        listing = page.locator(".message.ephemeral", has_text="sch-demo0001").last
        await expect(listing).to_contain_text("cpu01 / cpu")

        await page.select_option("#user-picker", "U0ALICE")
        await run(page, "/cluster schedule train01 off Fri 18:00 on Mon 08:00 tz Europe/Berlin")
        header = page.locator(
            ".message", has=page.locator(".block-header", has_text="Schedule request: train01")
        )
        await expect(header).to_be_visible()
        ts = await header.get_attribute("data-ts")
        card = page.locator(f'#messages .message[data-ts="{ts}"]')
        await expect(card).to_contain_text("NEXT OFF")
        await expect(card).to_contain_text("a week at list prices")
        await expect(card).to_contain_text("reserved capacity")  # its nights save nothing
        await page.select_option("#user-picker", "U0BOB")
        await card.locator("button", has_text="Approve").click()
        # a standing change is done as it is approved: its card may go straight to the end
        await expect(card).to_contain_text("Done: approved by @bob; the schedule is in force")

        await page.select_option("#user-picker", "U0ALICE")
        await run(page, "/cluster schedule eval01")
        await expect(page.locator("#modal-title")).to_have_text("Off-hours schedule")
        # the form starts at a weeknight schedule in UTC
        for action, value in (("off_days", "Mon-Fri"), ("off_time", "20:00"), ("tz", "UTC")):
            await expect(page.locator(f'[data-action-id="form_{action}"]')).to_have_value(value)
        assert errors == []


async def test_a_drained_gpu_node_is_alerted_and_healed_in_the_browser(tmp_path: Path) -> None:
    """The demo's train01 has a B200 node drained by a prolog health check (Xid 79): its
    alert is in #ml-infra; alice asks to resume it, bob approves, and the next sweep edits
    the same alert to say healed."""
    require(chromium_available(), "Chromium (/usr/bin/chromium)")
    async with demo_stack(tmp_path, sweep_interval=1) as stack, chromium() as browser:
        page, errors = await open_sandbox(browser, stack.url)
        await page.select_option("#user-picker", "U0ALICE")
        alert = page.locator(
            "#messages .message", has=page.locator(".block-header", has_text="Health: train01")
        )
        await expect(alert).to_be_visible(timeout=15_000)
        await expect(alert).to_contain_text("Xid 79: GPU has fallen off the bus")
        await expect(alert).to_contain_text("1 node out of service")
        ts = await alert.get_attribute("data-ts")
        health = page.locator(f'#messages .message[data-ts="{ts}"]')
        await keep_screenshot(page, "health-alert.png")
        await health.locator("button", has_text="Resume train01-a4-1").click()
        card = page.locator(
            "#messages .message", has=page.locator(".block-header", has_text="Resume node request")
        )
        await expect(card).to_be_visible()
        await page.select_option("#user-picker", "U0BOB")
        await card.locator("button", has_text="Approve").click()
        await expect(card).to_contain_text("Done: approved by @bob", timeout=15_000)
        await expect(health).to_contain_text("Healed", timeout=15_000)
        await expect(health.locator("button")).to_have_count(0)  # nothing left to fix
        assert errors == []
        posts = await stack.requests("POST")
        updates = [r for r in posts if "/node/" in str((r.get("body") or {}).get("path", ""))]
        assert len(updates) == 1
