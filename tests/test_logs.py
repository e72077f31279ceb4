"""The log formats: JSON objects with the call's fields as keys, or text with them as logfmt."""

from __future__ import annotations

import io
import json
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from recommender.cli.logs import JsonFormatter, TextFormatter, fields


def record(message: str, *args: object, exc: BaseException | None = None,
           **extra: object) -> logging.LogRecord:
    logger = logging.getLogger("recommender.test")
    exc_info = (type(exc), exc, exc.__traceback__) if exc else None
    return logger.makeRecord(logger.name, logging.WARNING, __file__, 1, message, args,
                             exc_info, extra=extra)


def test_json_has_the_four_keys_then_the_fields() -> None:
    r = record("%s %s", "Recommend", "OK", method="Recommend", code="OK", ms=1.25,
               action_id="a b", path=Path("/x"), level="not twice", n=3, ok=True,
               note='é "quoted"\n')
    line = JsonFormatter().format(r)
    assert "\n" not in line
    obj = json.loads(line)
    assert list(obj)[:4] == ["time", "level", "logger", "message"]
    assert obj["message"] == "Recommend OK" and obj["level"] == "warning"
    assert obj["logger"] == "recommender.test"
    assert (obj["method"], obj["code"], obj["ms"], obj["action_id"]) == (
        "Recommend", "OK", 1.25, "a b")
    assert obj["path"] == "/x"  # not JSON-serialisable: its str()
    assert (obj["n"], obj["ok"], obj["note"]) == (3, True, 'é "quoted"\n')
    assert line.count('"level"') == 1
    when = datetime.fromisoformat(obj["time"].replace("Z", "+00:00"))
    assert abs(when.timestamp() - r.created) < 0.001 and when.tzinfo == UTC
    assert list(fields(r)) == ["method", "code", "ms", "action_id", "path", "level", "n", "ok",
                               "note"]


def test_a_traceback_stays_on_the_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError as e:
        r = record("failed", exc=e, method="Recommend")
    line = JsonFormatter().format(r)
    assert "\n" not in line
    obj = json.loads(line)
    assert "ValueError: boom" in obj["exception"] and obj["method"] == "Recommend"
    text = TextFormatter().format(r)
    first, rest = text.split("\n", 1)
    assert first.endswith("failed method=Recommend") and "ValueError: boom" in rest


def test_text_puts_the_fields_after_the_message_as_logfmt() -> None:
    r = record("Recommend OK", method="Recommend", ms=0.5, error='pools[0]: bad "x"',
               action_id="resize")
    text = TextFormatter().format(r)
    assert " WARNING recommender.test Recommend OK method=Recommend ms=0.5 " in text
    assert text.endswith(' error="pools[0]: bad \\"x\\"" action_id=resize')
    assert TextFormatter().format(record("plain")).endswith(" recommender.test plain")


def test_the_batching_handler_writes_every_line_in_order_once_flushed() -> None:
    """Records handed over from many threads come out whole, in the order handed over (per
    thread), with arguments completed when logged (a later change does not show), after
    flush(); close() writes what is still queued. A lone caller's line is out when its logging
    call returns."""
    import io
    import threading

    from recommender.cli.logs import BatchingHandler

    stream = io.StringIO()
    target = logging.StreamHandler(stream)
    target.setFormatter(JsonFormatter())
    handler = BatchingHandler(target)
    logger = logging.Logger("recommender.test.background")
    logger.addHandler(handler)
    mutable = ["before"]

    def log_many(t: int) -> None:
        for i in range(300):
            logger.warning("%s %s", t, i, extra={"writer": t, "i": i})

    logger.warning("%s", mutable)
    mutable[0] = "after"
    # A warning is written before its call returns, by that caller: no thread.
    assert json.loads(stream.getvalue())["message"] == "['before']"
    assert all(t.name != "log-writer" for t in threading.enumerate())
    threads = [threading.Thread(target=log_many, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    handler.flush()
    lines = [json.loads(x) for x in stream.getvalue().splitlines()]
    assert len(lines) == 1 + 4 * 300
    assert lines[0]["message"] == "['before']"
    for t in range(4):
        assert [x["i"] for x in lines if x.get("writer") == t] == list(range(300))
    logger.warning("last one", extra={"i": -1})
    handler.close()
    assert json.loads(stream.getvalue().splitlines()[-1])["message"] == "last one"


class _CountingStream(io.StringIO):
    """Counts writes, as a line-buffered stderr would count its system calls."""

    writes = 0

    def write(self, text: str) -> int:
        self.writes += 1
        return super().write(text)


def test_access_lines_wait_a_moment_and_go_out_together_warnings_at_once() -> None:
    """Access lines (INFO) wait at most the handler's delay and are written in one write; a
    warning, or any other logger's line, takes every line queued before it out with it, in
    order; a full queue is written by the caller that fills it; close() writes the rest."""
    import threading
    import time

    from recommender.cli.logs import BatchingHandler

    stream = _CountingStream()
    target = logging.StreamHandler(stream)
    target.setFormatter(JsonFormatter())
    handler = BatchingHandler(target, delay_s=0.2, limit=50,
                              defer=frozenset({"recommender.test.delayed"}))
    logger = logging.Logger("recommender.test.delayed")
    progress = logging.Logger("recommender.test.progress")
    progress.addHandler(handler)
    logger.addHandler(handler)
    for i in range(10):
        logger.info("line %d", i, extra={"i": i})
    assert stream.getvalue() == ""  # waiting, not lost
    deadline = time.monotonic() + 5
    while not stream.getvalue() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [json.loads(x)["i"] for x in stream.getvalue().splitlines()] == list(range(10))
    assert stream.writes == 1
    assert any(t.name == "log-writer" for t in threading.enumerate())

    logger.info("queued", extra={"i": 10})
    logger.error("now", extra={"i": 11})  # written before the call returns, after "queued"
    assert [json.loads(x)["i"] for x in stream.getvalue().splitlines()][-2:] == [10, 11]
    logger.info("queued", extra={"i": 12})
    progress.info("another logger's line", extra={"i": 13})  # at once, too
    assert [json.loads(x)["i"] for x in stream.getvalue().splitlines()][-2:] == [12, 13]

    before = stream.writes
    for i in range(50):
        logger.info("burst", extra={"i": 100 + i})
    assert stream.writes == before + 1  # the 50th line's caller wrote the full queue
    logger.info("tail", extra={"i": -1})
    handler.close()
    lines = [json.loads(x)["i"] for x in stream.getvalue().splitlines()]
    assert lines[-51:] == [*range(100, 150), -1]
    assert len(lines) == len(set(lines))
    # Closed (logging.shutdown closes it again at exit): a late line is written at once.
    handler.close()
    logger.info("after", extra={"i": -2})
    assert json.loads(stream.getvalue().splitlines()[-1])["i"] == -2


def test_a_line_that_cannot_be_formatted_does_not_stop_the_writer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer reports it (logging's handleError) and writes the batch's other lines and
    the later ones."""
    import time

    from recommender.cli.logs import BatchingHandler

    class Fussy(JsonFormatter):
        def format(self, record: logging.LogRecord) -> str:
            if getattr(record, "i", None) == 1:
                raise RecursionError("a formatter gone wrong")
            return super().format(record)

    reported: list[logging.LogRecord] = []
    stream = io.StringIO()
    target = logging.StreamHandler(stream)
    target.setFormatter(Fussy())
    monkeypatch.setattr(target, "handleError", reported.append)
    handler = BatchingHandler(target, delay_s=0.05, defer=frozenset({"recommender.test.fussy"}))
    logger = logging.Logger("recommender.test.fussy")
    logger.addHandler(handler)
    def written() -> list[int]:
        return [json.loads(x)["i"] for x in stream.getvalue().splitlines()]

    for batch in ((0, 1, 2), (3,)):
        for i in batch:
            logger.info("line", extra={"i": i})
        deadline = time.monotonic() + 5
        while batch[-1] not in written() and time.monotonic() < deadline:
            time.sleep(0.01)
    assert written() == [0, 2, 3]
    assert [getattr(r, "i", None) for r in reported] == [1]
    handler.close()
