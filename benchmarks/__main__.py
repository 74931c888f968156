"""Run every benchmark and print its figures."""

from __future__ import annotations

import asyncio

from benchmarks import ack, fuzz, listing, sweep


def main() -> None:
    asyncio.run(listing.run())
    asyncio.run(sweep.run())
    asyncio.run(ack.run())
    fuzz.run()


main()
