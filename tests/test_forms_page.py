"""Forms and the Home tab on the demo page, in Chromium: the resize form fills in as it is
used and makes the card; the delete form refuses a mistyped id at its field; the Home tab
shows the request and opens the same form; private replies are gone after a reload."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.async_api import expect

from tests.conftest import require
from tests.support.browser import chromium, chromium_available, open_sandbox
from tests.support.demo_stack import demo_stack
from tests.test_demo_page import keep_screenshot, run

pytestmark = pytest.mark.browser


async def test_the_resize_form_and_the_home_tab_in_the_browser(tmp_path: Path) -> None:
    require(chromium_available(), "Chromium (/usr/bin/chromium)")
    async with demo_stack(tmp_path) as stack, chromium() as browser:
        page, errors = await open_sandbox(browser, stack.url, 1280, 820)
        await page.select_option("#user-picker", "U0ALICE")

        await run(page, "/cluster resize")
        modal = page.locator("#modal")
        await expect(modal).to_be_visible()
        await expect(page.locator("#modal-title")).to_have_text("Resize a node pool")
        cluster = page.locator('#modal .block-input[data-block-id="cluster"] input')
        await cluster.click()
        await cluster.fill("tra")
        only = page.locator("#modal .suggestion", has_text="train01")
        await expect(page.locator("#modal .suggestion")).to_have_count(1)
        await only.dispatch_event("mousedown")
        pool = page.locator('#modal .block-input[data-block-id="pool"] select')
        await expect(pool).to_be_visible()
        await pool.select_option("a4")
        low = page.locator('#modal .block-input[data-block-id="min:a4"] input')
        await expect(low).to_have_value("2")  # the pool's own count to start from
        await low.fill("3")
        # the redraw for Min first: typed into Max before it lands, both redraws carry the
        # same view hash, and the later one is refused as stale (Slack's hash_conflict)
        await expect(modal).to_contain_text("MAX 2 is less than MIN 3")  # Max still the pool's
        await page.locator('#modal .block-input[data-block-id="max:a4"] input').fill("1")
        # said as it is typed, under Max, and no cost after is guessed at
        problem = page.locator("#modal .block-context", has_text="MAX 1 is less than MIN 3")
        await expect(problem).to_have_count(1)
        await expect(modal).not_to_contain_text("~+$106.00/h")
        await page.click("#modal-submit")
        error = page.locator('#modal .block-input[data-block-id="max:a4"] .input-error')
        await expect(error).to_have_text("MAX 1 is less than MIN 3")
        await page.locator('#modal .block-input[data-block-id="max:a4"] input').fill("5")
        await expect(modal).to_contain_text("$530.39/h")  # the range up to five nodes
        await expect(problem).to_have_count(0)
        await keep_screenshot(page, "resize-form.png")
        await page.click("#modal-submit")
        await expect(modal).to_be_hidden()
        card = page.locator(".message", has=page.locator(".block-header", has_text="Resize"))
        await expect(card).to_contain_text("Resize request: train01 / a4")

        await page.click("#home-entry")
        home = page.locator("#home")
        await expect(home).to_contain_text("Your requests (1)")
        await expect(home).to_contain_text("Idle clusters")
        await keep_screenshot(page, "home-tab.png")
        await home.locator("button", has_text="Delete a cluster…").click()
        await expect(page.locator("#modal-title")).to_have_text("Delete a cluster")
        cluster = page.locator('#modal .block-input[data-block-id="cluster"] input')
        await cluster.click()
        await cluster.fill("cpu")
        await expect(page.locator("#modal .suggestion")).to_have_count(1)
        await page.locator("#modal .suggestion").dispatch_event("mousedown")
        confirm = page.locator('#modal .block-input[data-block-id="confirm"] input')
        await confirm.fill("cpu1")
        await page.click("#modal-submit")
        await expect(page.locator("#modal .input-error")).to_have_text("type cpu01 to confirm")
        await page.click("#modal-cancel")
        await expect(modal).to_be_hidden()

        # alice withdraws her own request on its card; the thread tells her, by mention
        await page.click("#channel-list li:first-child")
        await card.locator("button", has_text="Withdraw").click()
        await expect(card).to_contain_text("Withdrawn by @alice")
        await expect(card.locator(".block-actions button")).to_have_count(0)
        await card.locator(".replies").click()
        await expect(page.locator("#thread")).to_contain_text("your request")
        await expect(page.locator("#thread")).to_contain_text("was withdrawn")

        # the audit log as a CSV file in the channel, opened from the page
        await run(page, "/cluster audit train01")
        audit = page.locator(".message.ephemeral", has_text="Audit log for train01")
        await audit.locator("button", has_text="CSV").click()
        shared = page.locator("#messages a.file")
        await expect(shared).to_contain_text("audit-train01-")
        async with page.expect_popup() as opened:
            await shared.click()
        csv_page = await opened.value
        await expect(csv_page.locator("body")).to_contain_text("time_utc,actor,action")
        await csv_page.close()

        # a private reply is gone after a reload, as in Slack
        await run(page, "/cluster help")  # private, with the audit log and its answer
        await expect(page.locator(".message.ephemeral")).to_have_count(3)
        await page.reload()
        await expect(page.locator("#connection")).to_have_text("live")
        await expect(card).to_be_visible()
        await expect(page.locator(".message.ephemeral")).to_have_count(0)
        # emoji are drawn with the page's own font (no empty boxes), and it has an icon
        loaded = await page.evaluate(
            "document.fonts.load(\"16px 'Noto Emoji'\", '\\u26a0').then(f => f.length)"
        )
        assert loaded >= 1
        drawn = await page.evaluate("Mrkdwn.render(':warning: careful')")
        assert '<span class="emoji" title=":warning:">\u26a0\ufe0f</span>' in drawn
        icon = await page.evaluate(
            "fetch(document.querySelector('link[rel=icon]').href).then(r => r.status)"
        )
        assert icon == 200
        assert errors == []


async def test_the_script_form_takes_an_uploaded_file_in_the_browser(tmp_path: Path) -> None:
    require(chromium_available(), "Chromium (/usr/bin/chromium)")
    script = tmp_path / "gpu-check.sh"
    script.write_text("#!/bin/bash\n# the GPUs answer before each job\nnvidia-smi -L\n")
    async with demo_stack(tmp_path) as stack, chromium() as browser:
        page, errors = await open_sandbox(browser, stack.url, 1280, 820)
        await page.select_option("#user-picker", "U0ALICE")
        await run(page, "/cluster slurm train01 prolog add")
        await expect(page.locator("#modal-title")).to_have_text("Add a prolog script")
        pasted = page.locator('#modal .block-input[data-block-id="paste"] textarea')
        await pasted.fill("echo one")
        await page.set_input_files('#modal .block-input[data-block-id="file"] input', script)
        await page.click("#modal-submit")
        error = page.locator('#modal .block-input[data-block-id="file"] .input-error')
        await expect(error).to_contain_text("not both")
        await pasted.fill("")
        await page.click("#modal-submit")
        await expect(page.locator("#modal")).to_be_hidden()
        card = page.locator(".message", has=page.locator(".block-header", has_text="Slurm scripts"))
        await expect(card).to_contain_text("add prolog at place 2")
        await expect(card).to_contain_text(f"{len(script.read_bytes())} bytes")
        assert errors == []
