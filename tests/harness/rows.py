"""The database read directly, bypassing the service: what is really stored."""

from __future__ import annotations

from collections import Counter

from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool


def column(url: str, sql: str) -> list[str]:
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return [str(r[0]) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


def execution_ids(url: str) -> list[str]:
    return column(url, "SELECT execution_id FROM executions")


def recommendation_ids(url: str) -> list[str]:
    return column(url, "SELECT id FROM recommendations")


def assert_exactly_once(url: str, expected: set[str]) -> None:
    """The executions table holds each expected id once and nothing else."""
    rows = execution_ids(url)
    twice = sorted(k for k, n in Counter(rows).items() if n > 1)
    lost = sorted(expected - set(rows))
    extra = sorted(set(rows) - expected)
    assert not twice, f"{len(twice)} executions stored more than once: {twice[:10]}"
    assert not lost, f"{len(lost)} acknowledged executions lost: {lost[:10]}"
    assert not extra, f"{len(extra)} executions stored that no client had acknowledged: " \
                      f"{extra[:10]}"
