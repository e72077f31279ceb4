"""Harnesses the tests share: the real server in a child process and clients that keep a
ledger of what they saw (tests/test_faults.py), the database read directly, and the real
server in this process with hypothesis strategies and per-RPC properties (tests/test_fuzz.py).
Only tests import these; none of it is a test."""
