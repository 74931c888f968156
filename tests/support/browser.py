"""Headless Chromium from Debian's package, driven by Playwright (no browser downloads)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from playwright.async_api import Browser, Page, async_playwright, expect

CHROMIUM = Path(os.environ.get("CLUSTERBOT_CHROMIUM", "/usr/bin/chromium"))
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
# Without these Chromium tries to reach Google's services at start, which this machine refuses.
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_available() -> bool:
    return CHROMIUM.is_file() and os.access(CHROMIUM, os.X_OK)


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=FLAGS
        )
        try:
            yield browser
        finally:
            await browser.close()


async def open_sandbox(
    browser: Browser, url: str, width: int = 1360, height: int = 860
) -> tuple[Page, list[str]]:
    """The sandbox page, live, and the list its errors go to: an uncaught script error, or a
    console error (a failed load, such as a missing favicon, is one)."""
    page = await browser.new_page(viewport={"width": width, "height": height})
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    await page.goto(url + "/")
    await expect(page.locator("#connection")).to_have_text("live")
    return page, errors
