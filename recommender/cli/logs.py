"""Log lines for machines (one JSON object a line) or for people (text), chosen per command.

`serve` runs in containers whose logs are collected and searched (Loki, Elasticsearch, Cloud
Logging): there every line is one JSON object, and a call's method, status and ids are fields
of it, not JSON inside a text message, so a collector needs no parsing rule of ours. At a
terminal, `--log-format text` reads better. Fields come from `extra=` of the logging call:
`log.info("Recommend OK", extra={"method": "Recommend", "ms": 1.2})`.
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import math
import sys
import threading
import time
from types import TracebackType
from typing import Any, TextIO

from recommender.core.config import LOG_DELAY_S, LOG_QUEUE_LIMIT

CLOSE_WAIT_S = 5.0
"""How long `close` waits for the log writer's write in progress (then writes what is left)."""

LEVELS = ("debug", "info", "warning", "error", "critical")
FORMATS = ("json", "text")

# One encoder for every line (json.dumps with options builds a new one per call), and none at
# all for strings and finite numbers, which are what nearly every field is: the access line is
# written on every call. encode_basestring_ascii is json's own string quoting, in C.
_encode = json.JSONEncoder(default=str).encode
_quote = json.encoder.encode_basestring_ascii


def _value(v: Any) -> str:
    kind = type(v)
    if kind is str:
        return _quote(v)
    if kind is int or (kind is float and math.isfinite(v)):
        return repr(v)
    return _encode(v)

# What every LogRecord carries; anything else on a record came from `extra=` and is a field.
_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {
    "message", "asctime", "taskName"}
_HEAD = _STANDARD | {"time", "level", "logger"}
_KEYS: dict[str, str] = {}
"""Field names as JSON strings, quoted once (a bounded table: names come from our code)."""


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """The `extra=` fields of a record, in the order they were given."""
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD and k[:1] != "_"}


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC, ISO 8601, milliseconds), level, logger, message,
    then the record's fields; a traceback is the `exception` field, so it stays on one line.
    (A field cannot be named like a LogRecord attribute: logging refuses `extra={"name": ..}`.)"""

    _stamped: tuple[int, str] = (-1, "")
    """(second, its time stamp): the access line is written on every call, the stamp made once
    a second (one tuple, so that two threads formatting cannot pair a second with another's)."""

    def format(self, record: logging.LogRecord) -> str:
        second, stamp = self._stamped
        if second != int(record.created):
            second = int(record.created)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
            self._stamped = (second, stamp)
        parts = [f'{{"time": "{stamp}.{int(record.msecs):03d}Z", '
                 f'"level": {_quote(record.levelname.lower())}, "logger": {_quote(record.name)}, '
                 f'"message": {_quote(record.getMessage())}']
        for key, value in record.__dict__.items():
            if key not in _HEAD and key[:1] != "_":  # the four above are never repeated
                quoted = _KEYS.get(key)
                if quoted is None:
                    quoted = _quote(key)
                    if len(_KEYS) < 1024:
                        _KEYS[key] = quoted
                parts.append(f", {quoted}: {_value(value)}")
        if record.exc_info:
            parts.append(f', "exception": {_quote(self.formatException(record.exc_info))}')
        if record.stack_info:
            parts.append(f', "stack": {_quote(self.formatStack(record.stack_info))}')
        parts.append("}")
        return "".join(parts)


class TextFormatter(logging.Formatter):
    """`time LEVEL logger message key=value ...`: the fields as logfmt, for a person."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        extra = fields(record)
        if not extra:
            return text
        head, sep, tail = text.partition("\n")  # a traceback goes after the fields
        pairs = " ".join(f"{k}={_logfmt(v)}" for k, v in extra.items())
        return f"{head} {pairs}{sep}{tail}"


def _logfmt(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if text and not any(c in text for c in ' "=\n') else json.dumps(text)


def log_level(value: str) -> str:
    """--log-level / RECOMMENDER_LOG_LEVEL: one of LEVELS (any case)."""
    if value.strip().lower() not in LEVELS:
        raise argparse.ArgumentTypeError(
            f"{value!r}: one of {', '.join(LEVELS)} (--log-level, RECOMMENDER_LOG_LEVEL)")
    return value.strip().lower()


def log_format(value: str) -> str:
    """--log-format / RECOMMENDER_LOG_FORMAT: json or text."""
    if value.strip().lower() not in FORMATS:
        raise argparse.ArgumentTypeError(
            f"{value!r}: json or text (--log-format, RECOMMENDER_LOG_FORMAT)")
    return value.strip().lower()


class BatchingHandler(logging.Handler):
    """Writes records through `target` (a StreamHandler) in batches, one write and one flush a
    batch: an access line (a record of a logger in `defer`, below WARNING) waits at most
    `delay_s` in memory; any other record (a warning, an error, a command's progress) is written
    at once, with every record queued before it, by the thread that logged it.

    The access line is written on every call. Written and flushed by each RPC thread (the last
    design), its write was a system call that released the interpreter lock on every call. Here
    a caller completes the record's message (so arguments changed later cannot change the
    line), appends it to a deque and returns; a writer thread, woken by the first record after
    it last wrote, waits `delay_s` and writes the batch: at most 1 / `delay_s` wake-ups and
    writes a second, however many calls (the writer thread before the last design waited 2 ms,
    and so woke for nearly every call of a lone caller). A queue of `limit` records is written
    by the caller that fills it.

    The order of lines is the order records were handed over. `flush` (and `close`, and
    `logging.shutdown` at exit, which SIGTERM reaches) writes what is queued; a SIGKILL loses
    at most `delay_s` of access lines, never anything else. The stream's lock is held while
    writing, so a stream that blocks (a log pipe nobody reads) stalls the writer, then the
    callers that write at once or fill the queue, not the others.
    """

    def __init__(self, target: logging.StreamHandler[TextIO], *,
                 delay_s: float = LOG_DELAY_S, limit: int = LOG_QUEUE_LIMIT,
                 defer: frozenset[str] = frozenset({"recommender.access"})) -> None:
        super().__init__(target.level)
        self.target = target
        self._delay_s = delay_s
        self._limit = limit
        self._defer = defer
        self._queue: collections.deque[logging.LogRecord] = collections.deque()
        self._writing = threading.Lock()
        self._wake = threading.Event()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()

    def handle(self, record: logging.LogRecord) -> bool:
        # No handler lock: deque.append is atomic, and only the holder of _writing drains.
        rv = self.filter(record)
        if rv:
            self.emit(record)
        return bool(rv)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if record.args:
                record.msg, record.args = record.getMessage(), None
        except Exception:
            self.handleError(record)
            return
        queue = self._queue
        queue.append(record)
        if (record.name not in self._defer or record.levelno >= logging.WARNING
                or len(queue) >= self._limit or self._closing.is_set()):
            self._write_now()
        elif not self._wake.is_set():
            # Set after the append: the writer clears the event before it waits and drains,
            # so a record appended before a set it saw (or made) is in the next drain.
            if self._thread is None:
                self._start()
            self._wake.set()

    def _write_now(self) -> None:
        """Drains on this thread unless another is writing; that one checks again after."""
        queue, writing = self._queue, self._writing
        while queue and writing.acquire(blocking=False):
            try:
                self._drain()
            finally:
                writing.release()

    def _start(self) -> None:
        with self._starting:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="log-writer",
                                                daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while not self._closing.is_set():
            self._wake.wait()
            self._wake.clear()
            self._closing.wait(self._delay_s)  # gather a batch; close() cuts it short
            try:
                with self._writing:
                    self._drain()
                self._write_now()  # what a caller left while this thread held the lock
            except Exception:
                # _write reports a line it cannot format or write (handleError); nothing
                # else may stop the writer, or the next access lines would wait for a warning.
                continue

    def _drain(self) -> None:
        """Writes what is queued; called with `_writing` held."""
        queue = self._queue
        batch: list[logging.LogRecord] = []
        while queue:
            batch.append(queue.popleft())
        if batch:
            self._write(batch)

    def _write(self, batch: list[logging.LogRecord]) -> None:
        target = self.target
        lines: list[str] = []
        for record in batch:
            try:
                lines.append(target.format(record) + target.terminator)
            except Exception:  # reported, and the batch's other lines still written
                target.handleError(record)
        with target.lock or _NO_LOCK:
            # One write: a line-buffered stream (stderr) makes a system call per write.
            try:
                target.stream.write("".join(lines))
                target.stream.flush()
            except Exception:
                target.handleError(batch[-1])

    def flush(self) -> None:
        """Returns once every record handed over before the call is written and flushed."""
        with self._writing:
            self._drain()

    def setFormatter(self, fmt: logging.Formatter | None) -> None:
        self.target.setFormatter(fmt)

    def close(self) -> None:
        self._closing.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(CLOSE_WAIT_S)
        self.flush()
        self.target.close()
        super().close()


class _NoLock:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *_exc: object) -> None:
        return None


_NO_LOCK = _NoLock()

_plain_formatter: logging.Formatter = logging.Formatter("%(message)s")


def setup_logging(level: str, fmt: str, stream: TextIO | None = None) -> None:
    """Configures the root logger for the process. A process that configured logging before
    (a test runner, a program calling main()) keeps its handlers; only the level is set."""
    global _plain_formatter
    root = logging.getLogger()
    root.setLevel(getattr(logging, level.upper()))
    # Alembic narrates every plugin at INFO; only its warnings concern an operator.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    _plain_formatter = JsonFormatter() if fmt == "json" else logging.Formatter("%(message)s")
    if root.handlers:
        return
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root.addHandler(BatchingHandler(handler))
    # Neither format shows the source file, line, thread or process of a record: not looking
    # them up saves a frame walk and three lookups on every record (the logging HOWTO's
    # "Optimization" section), and the access line is one record per call.
    logging._srcfile = None
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    if fmt == "json":
        # Python warnings and uncaught exceptions (in any thread) become JSON lines too,
        # instead of a multi-line traceback a log collector splits into fragments.
        logging.captureWarnings(True)
        sys.excepthook = _log_uncaught
        threading.excepthook = _log_uncaught_in_thread


def announce(logger: logging.Logger, message: str, *, level: int = logging.INFO,
             stream: TextIO | None = None, **extra: Any) -> None:
    """A line for whoever started the process, on stdout (`listening on [::]:50051`) or
    stderr (why it refuses to start): the bare message in text format, a JSON object like
    the log's in JSON format, so a container's combined output stays one JSON object a line.
    Written directly, not through the log's handlers: it is for the caller, at any level."""
    record = logger.makeRecord(logger.name, level, "(announce)", 0, message, (), None,
                               extra=extra)
    print(_plain_formatter.format(record), file=stream or sys.stdout, flush=True)


def _log_uncaught(kind: type[BaseException], value: BaseException,
                  tb: TracebackType | None) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, value, tb)
        return
    logging.getLogger("recommender").critical("uncaught exception", exc_info=(kind, value, tb))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None:
        return
    logging.getLogger("recommender").error(
        "uncaught exception in thread %s", args.thread.name if args.thread else "?",
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback))


__all__ = ["FORMATS", "LEVELS", "BatchingHandler", "JsonFormatter", "TextFormatter", "announce",
           "fields", "log_format", "log_level", "setup_logging"]
