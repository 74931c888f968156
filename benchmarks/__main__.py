"""Run every benchmark and print its figures."""

from __future__ import annotations

import asyncio

from benchmarks import ack, listing


def main() -> None:
    asyncio.run(listing.run())
    asyncio.run(ack.run())


main()
