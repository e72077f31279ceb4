"""store/migrating.py: a database down at start is migrated once it is up, or given up on."""

from __future__ import annotations

import threading

import pytest

from recommender.core.domain import StoreUnavailable
from recommender.store.migrating import MigrationRetry


class FlakyDatabase:
    """Refuses the first `down` migrations, then migrates."""

    def __init__(self, down: int) -> None:
        self.down = down
        self.tries = 0
        self.migrated = False

    def migrate(self) -> None:
        self.tries += 1
        if self.tries <= self.down:
            raise StoreUnavailable(f"connection refused ({self.tries})")
        self.migrated = True


def test_migrates_once_the_database_answers() -> None:
    db = FlakyDatabase(down=3)  # the caller's try and two of the retry's
    gave_up = threading.Event()
    retry = MigrationRetry(db.migrate, wait_s=30, on_give_up=gave_up.set,
                           first_pause_s=0.01,
                           max_pause_s=0.02)
    db.tries = 1
    retry.start()
    assert retry.done.wait(10)
    retry.stop()
    assert db.migrated and db.tries == 4 and not gave_up.is_set() and retry.gave_up is None


def test_gives_up_after_the_wait_with_the_last_error() -> None:
    db = FlakyDatabase(down=10**6)
    gave_up = threading.Event()
    now = [0.0]
    retry = MigrationRetry(db.migrate, wait_s=1.0, on_give_up=gave_up.set,
                           clock=lambda: now[0], first_pause_s=0.001,
                           max_pause_s=0.001)
    original = db.migrate

    def migrate_and_age() -> None:  # each try costs a quarter of the wait
        now[0] += 0.25
        original()

    retry.migrate = migrate_and_age
    retry.run()  # in this thread: returns when it gives up
    assert gave_up.is_set() and not retry.done.is_set() and not db.migrated
    assert retry.gave_up is not None and "--database-wait" in retry.gave_up
    assert f"connection refused ({db.tries})" in retry.gave_up
    assert db.tries == 4  # at 0.25, 0.5, 0.75, 1.0: the last try is at the deadline


@pytest.mark.parametrize("pause", [0.5, 10.0])
def test_stop_ends_the_wait_between_tries(pause: float) -> None:
    db = FlakyDatabase(down=10**6)
    retry = MigrationRetry(db.migrate, wait_s=600, on_give_up=lambda: None,
                           first_pause_s=pause, max_pause_s=pause)
    retry.start()
    retry.stop()  # joins: it would hang for the pause if the wait ignored stop
    assert retry._thread is not None and not retry._thread.is_alive()
    assert retry.gave_up is None and not db.migrated
