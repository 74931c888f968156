"""The sandbox page in a real browser: type a command, see the reply, click, see the edit."""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Page, expect
from playwright.async_api import TimeoutError as PlaywrightTimeout
from slack_sdk.web.async_client import AsyncWebClient

from tests.conftest import require
from tests.support.browser import ARTIFACTS, chromium, chromium_available
from tests.support.slack_stack import TOKEN, SlackStack

pytestmark = pytest.mark.browser


@pytest.fixture
async def page(stack: SlackStack) -> AsyncIterator[Page]:
    require(chromium_available(), "Chromium (/usr/bin/chromium)")
    async with chromium() as browser:
        context = await browser.new_context(viewport={"width": 1280, "height": 800})
        page = await context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        await page.goto(stack.url + "/")
        await expect(page.locator("#connection")).to_have_text("live")
        yield page
        assert errors == [], errors  # no script errors on the page
        await context.close()


async def run(page: Page, text: str) -> None:
    await page.fill("#composer-input", text)
    await page.press("#composer-input", "Enter")


async def test_command_reply_click_and_edit(page: Page, stack: SlackStack) -> None:
    await page.select_option("#user-picker", "U0ALICE")
    await run(page, "/cluster help")
    reply = page.locator(".message.ephemeral")
    await expect(reply).to_contain_text("usage: /cluster help | ping | card")
    await expect(reply).to_contain_text("Only visible to you")

    await run(page, "/cluster card")
    header = page.locator(".message", has=page.locator(".block-header", has_text="Resize train01"))
    await expect(header).to_be_visible()
    card = page.locator(f'.message[data-ts="{await header.get_attribute("data-ts")}"]')
    await expect(card.locator(".section-fields b").first).to_have_text("Requested by")
    await expect(card.locator(".mention")).to_have_text("@alice")
    await expect(card.locator("button.btn.primary")).to_have_text("Approve")
    await expect(card.locator("button.btn.danger")).to_have_text("Reject")

    # bob does not see alice's ephemeral reply, and approves the card
    await page.select_option("#user-picker", "U0BOB")
    await expect(page.locator(".message.ephemeral")).to_have_count(0)
    await card.locator("button", has_text="Approve").click()
    await expect(card.locator(".edited")).to_have_text("(edited)")
    await expect(card).to_contain_text("Approved by @bob")
    replies = card.locator("button.replies")
    await expect(replies).to_contain_text("1 reply")
    await replies.click()
    await expect(page.locator("#thread")).to_be_visible()
    await expect(page.locator("#thread-messages")).to_contain_text("Operation started: 0%")
    ARTIFACTS.mkdir(exist_ok=True)
    await page.screenshot(path=str(ARTIFACTS / "sandbox-page.png"))


async def test_confirm_dialog_is_honoured(page: Page, stack: SlackStack) -> None:
    await run(page, "/cluster card")
    header = page.locator(".message", has=page.locator(".block-header"))
    await expect(header).to_be_visible()
    card = page.locator(f'.message[data-ts="{await header.get_attribute("data-ts")}"]')
    await card.locator("button", has_text="Reject").click()
    dialog = page.locator("dialog#confirm")
    await expect(dialog).to_be_visible()
    await expect(dialog.locator("h2")).to_have_text("Reject this change?")
    await expect(dialog.locator("b")).to_have_text("closed")
    await dialog.locator("button", has_text="Keep it").click()
    await expect(dialog).to_be_hidden()
    await page.wait_for_timeout(300)
    messages = await stack.messages()
    assert messages[0]["edited"] is None  # denied: nothing was sent to the app

    await card.locator("button", has_text="Reject").click()
    await dialog.locator("button", has_text="Reject").click()
    await expect(card.locator(".text")).to_have_text("Rejected")
    await expect(card.locator(".edited")).to_be_visible()


async def test_mrkdwn_is_rendered_safely(page: Page, stack: SlackStack) -> None:
    client = AsyncWebClient(token=TOKEN, base_url=stack.api_url)
    hostile = (
        "*bold* _italic_ ~gone~ `x<b>` <@U0BOB> <#C0MLINFRA> <https://example.com|a link> "
        '<javascript:alert(1)|bad> &lt;!channel&gt; <img src=x onerror="window.pwned=1"> '
        '"quoted" & done\n```<script>window.pwned=2</script>```'
    )
    await client.chat_postMessage(channel="C0MLINFRA", text=hostile)
    text = page.locator(".message .text").last
    await expect(text.locator("b")).to_have_text("bold")
    await expect(text.locator("i")).to_have_text("italic")
    await expect(text.locator("s")).to_have_text("gone")
    await expect(text.locator("code")).to_have_text("x<b>")
    await expect(text.locator(".mention").nth(0)).to_have_text("@bob")
    await expect(text.locator(".mention").nth(1)).to_have_text("#ml-infra")
    await expect(text.locator("a")).to_have_count(1)
    await expect(text.locator("a")).to_have_attribute("href", "https://example.com")
    await expect(text.locator("img, script")).to_have_count(0)
    await expect(text.locator("pre")).to_have_text("<script>window.pwned=2</script>")
    await expect(text).to_contain_text("<!channel>")
    await expect(text).to_contain_text('"quoted" & done')
    assert await page.evaluate("window.pwned") is None


async def test_live_updates_without_reload(page: Page, stack: SlackStack) -> None:
    client = AsyncWebClient(token=TOKEN, base_url=stack.api_url)
    posted = await client.chat_postMessage(channel="C0MLINFRA", text="first version")
    message = page.locator(f'.message[data-ts="{posted["ts"]}"]')
    await expect(message).to_contain_text("first version")
    await client.chat_update(channel="C0MLINFRA", ts=posted["ts"], text="second version")
    await expect(message).to_contain_text("second version")
    await expect(message.locator(".edited")).to_be_visible()
    await client.chat_delete(channel="C0MLINFRA", ts=posted["ts"])
    await expect(message).to_have_count(0)
    # a message in another channel marks it unread
    await client.chat_postMessage(channel="C0GENERAL", text="elsewhere")
    await expect(page.locator("#channel-list li.unread")).to_have_text("#general")


COUNT_DRAWS = """() => {
    window.drawn = [];
    const draw = renderMessage;
    renderMessage = (message, options) => {
        window.drawn.push(message.ts);
        return draw(message, options);
    };
}"""


async def test_an_event_draws_only_what_it_changed(page: Page, stack: SlackStack) -> None:
    """A channel of 70 messages: loading it again draws nothing, a new message, an edit and a
    thread reply each draw one message (the reply its parent, for its count), every other node
    stays the one it was, and the view stays at the bottom."""
    client = AsyncWebClient(token=TOKEN, base_url=stack.api_url)
    posted = [
        await client.chat_postMessage(channel="C0MLINFRA", text=f"line {n}\n" + "words " * 40)
        for n in range(70)
    ]
    await expect(page.locator("#messages article.message")).to_have_count(70)
    await page.evaluate("""() => {
        for (const node of document.querySelectorAll('#messages article.message')) {
            node.dataset.kept = 'yes';
        }
    }""")
    await page.evaluate(COUNT_DRAWS)
    await page.evaluate("loadMessages()")  # as after the event stream reconnects
    assert await page.evaluate("window.drawn") == []

    newest = await client.chat_postMessage(channel="C0MLINFRA", text="the newest")
    await expect(page.locator(f'.message[data-ts="{newest["ts"]}"]')).to_be_visible()
    assert await page.evaluate("window.drawn") == [newest["ts"]]

    fifth = posted[5]["ts"]
    await client.chat_update(channel="C0MLINFRA", ts=fifth, text="line 5, edited")
    await expect(page.locator(f'.message[data-ts="{fifth}"]')).to_contain_text("line 5, edited")
    await client.chat_postMessage(channel="C0MLINFRA", text="a reply", thread_ts=posted[9]["ts"])
    parent = page.locator(f'.message[data-ts="{posted[9]["ts"]}"]')
    await expect(parent.locator("button.replies")).to_contain_text("1 reply")
    assert await page.evaluate("window.drawn") == [newest["ts"], fifth, posted[9]["ts"]]

    kept = await page.evaluate("""() => [...document.querySelectorAll('#messages article.message')]
        .filter((node) => node.dataset.kept === 'yes').length""")
    assert kept == 70 - 2  # all but the edited message and the reply's parent, drawn anew
    at_bottom = await page.evaluate("""() => {
        const list = document.getElementById('messages');
        return list.scrollHeight - list.scrollTop - list.clientHeight < 2;
    }""")
    assert at_bottom


def tall_png(width: int = 640, height: int = 900) -> bytes:
    """A grey PNG taller than the view, made byte by byte (PNG spec: signature, IHDR, IDAT
    of filtered rows, IEND)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"".join(
        (b"\x89PNG\r\n\x1a\n", chunk(b"IHDR", header), chunk(b"IDAT", zlib.compress(rows)))
    ) + chunk(b"IEND", b"")


async def test_the_view_stays_at_the_bottom_as_an_image_arrives(
    page: Page, stack: SlackStack
) -> None:
    """A shared image is drawn after its message (a chart arrives as a file): a view that
    was at the bottom is at the bottom once it has loaded, not its height above it."""
    client = AsyncWebClient(token=TOKEN, base_url=stack.api_url)
    for n in range(30):
        await client.chat_postMessage(channel="C0MLINFRA", text=f"line {n}\n" + "words " * 40)
    await expect(page.locator("#messages article.message")).to_have_count(30)
    await client.files_upload_v2(
        channel="C0MLINFRA", content=tall_png(), filename="tall.png", title="tall"
    )
    await page.wait_for_function("""() => {
        const image = document.querySelector('#messages img.file-image');
        return image !== null && image.complete && image.naturalHeight > 0;
    }""")
    # An image is complete a moment before its load event is handled: wait for the view to
    # settle at the bottom, and say how far above it the view stayed if it never does.
    gap = """() => {
        const list = document.getElementById('messages');
        return list.scrollHeight - list.scrollTop - list.clientHeight;
    }"""
    try:
        await page.wait_for_function(f"() => ({gap})() < 2", timeout=10_000)
    except PlaywrightTimeout:
        pytest.fail(f"the view stayed {await page.evaluate(gap)} px above the newest message")


async def test_composer_refuses_plain_text(page: Page) -> None:
    await run(page, "hello there")
    await expect(page.locator("#toast")).to_contain_text("start with /cluster")
    await run(page, "/deploy now")
    await expect(page.locator("#toast")).to_contain_text("is not a command here")


async def test_the_sidebar_marks_private_channels_and_direct_messages(page: Page) -> None:
    items = page.locator("#channel-list li")
    await expect(items).to_have_text(
        ["#ml-infra", "#general", "#random", "secret-lab", "@alice-bob"]
    )
    # the lock is drawn (an emoji would be a box where no emoji font is installed)
    await expect(items.nth(3).locator(".sigil.private svg")).to_have_count(1)
    # where the bot was never invited, hovering says so
    await expect(items.nth(2)).to_have_attribute(
        "title", "clusterbot is not a member of this conversation"
    )
    await expect(items.nth(0)).not_to_have_attribute("title", re.compile(".+"))
    await items.nth(4).click()
    await expect(page.locator("#channel-title")).to_have_text("@alice-bob")
    await expect(page.locator("#composer-input")).to_have_attribute(
        "placeholder", re.compile("^Message alice-bob: ")
    )
