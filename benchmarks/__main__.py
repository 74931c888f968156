"""Run every benchmark and print its figures."""

from __future__ import annotations

import asyncio

from benchmarks import listing


def main() -> None:
    asyncio.run(listing.run())


main()
