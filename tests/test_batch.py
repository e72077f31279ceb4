"""Group commit: who writes, what each caller gets back, what a failure does."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import pytest

from recommender.store.batch import GroupCommit


class Recorder:
    """A write function that can be held open, so callers pile up behind it."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.threads: list[str] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.active = 0
        self.max_active = 0
        self.fail_on: int | None = None
        self._lock = threading.Lock()

    def __call__(self, items: Sequence[int]) -> list[int]:
        with self._lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            self.entered.set()
            self.gate.wait(10)
            self.batches.append(list(items))
            self.threads.append(threading.current_thread().name)
            if self.fail_on is not None and self.fail_on in items:
                raise ConnectionError(f"lost the database writing {self.fail_on}")
            return [i * 10 for i in items]
        finally:
            with self._lock:
                self.active -= 1


def test_a_lone_caller_writes_its_own_row_in_its_own_thread() -> None:
    write = Recorder()
    group: GroupCommit[int, int] = GroupCommit(write, "test")
    assert group.submit(3) == 30
    assert group.submit(4) == 40
    assert write.batches == [[3], [4]]
    assert write.threads == [threading.current_thread().name] * 2


def _submit_all(group: GroupCommit[int, int], items: range
                ) -> tuple[dict[int, int], dict[int, BaseException], list[threading.Thread]]:
    results: dict[int, int] = {}
    errors: dict[int, BaseException] = {}

    def call(i: int) -> None:
        try:
            results[i] = group.submit(i)
        except BaseException as e:
            errors[i] = e

    threads = [threading.Thread(target=call, args=(i,)) for i in items]
    for t in threads:
        t.start()
    return results, errors, threads


def _pile_up(write: Recorder, group: GroupCommit[int, int], n: int = 10
             ) -> tuple[dict[int, int], dict[int, BaseException]]:
    """Item 0 is written while items 1..n queue behind it; then all run to the end. Returns
    the answers and errors of items 1..n."""
    write.gate.clear()
    first, first_errors, first_threads = _submit_all(group, range(1))
    assert write.entered.wait(5)
    results, errors, threads = _submit_all(group, range(1, n + 1))
    deadline = time.monotonic() + 10
    while len(group._pending) < n:  # all queued behind the write in progress
        assert time.monotonic() < deadline, "callers did not queue"
        time.sleep(0.001)
    write.gate.set()
    for t in (*first_threads, *threads):
        t.join(10)
    assert first == {0: 0} and not first_errors
    return results, errors


def test_callers_that_arrive_during_a_write_share_the_next_one() -> None:
    write = Recorder()
    group: GroupCommit[int, int] = GroupCommit(write, "test")
    results, errors = _pile_up(write, group)
    assert not errors
    assert results == {i: i * 10 for i in range(1, 11)}
    assert [sorted(b) for b in write.batches] == [[0], list(range(1, 11))]
    assert write.max_active == 1, "two writes ran at once"


def test_max_batch_splits_and_every_caller_is_answered() -> None:
    write = Recorder()
    group: GroupCommit[int, int] = GroupCommit(write, "test", max_batch=4)
    results, errors = _pile_up(write, group)
    assert not errors and results == {i: i * 10 for i in range(1, 11)}
    assert [len(b) for b in write.batches] == [1, 4, 4, 2]
    assert write.max_active == 1


def test_a_failed_write_fails_its_batch_only() -> None:
    write = Recorder()
    write.fail_on = 5
    group: GroupCommit[int, int] = GroupCommit(write, "test")
    results, errors = _pile_up(write, group)
    assert set(errors) == set(range(1, 11)) and not results
    assert all(isinstance(e, ConnectionError) for e in errors.values())
    write.fail_on = None
    assert group.submit(11) == 110, "the group is usable after a failure"


def test_a_write_that_returns_the_wrong_number_of_results_is_an_error() -> None:
    group: GroupCommit[int, int] = GroupCommit(lambda items: [], "test")
    with pytest.raises(RuntimeError, match="0 results for 1 items"):
        group.submit(1)
