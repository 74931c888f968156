"""Helpers shared by the tests: the stand-ins and `serve` as real processes, PostgreSQL."""
