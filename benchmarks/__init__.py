"""Benchmarks run by `make bench`; each prints its own figures."""
