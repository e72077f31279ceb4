"""Log lines for machines (one JSON object a line) or for people (text), chosen per command.

`serve` runs in containers whose logs are collected and searched (Loki, Elasticsearch, Cloud
Logging): there every line is one JSON object, and a call's method, status and ids are fields
of it, not JSON inside a text message, so a collector needs no parsing rule of ours. At a
terminal, `--log-format text` reads better. Fields come from `extra=` of the logging call:
`log.info("Recommend OK", extra={"method": "Recommend", "ms": 1.2})`.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import threading
import time
from types import TracebackType
from typing import Any, TextIO

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


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """The `extra=` fields of a record, in the order they were given."""
    return {k: v for k, v in record.__dict__.items() if k not in _STANDARD and k[:1] != "_"}


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time (UTC, ISO 8601, milliseconds), level, logger, message,
    then the record's fields; a traceback is the `exception` field, so it stays on one line.
    (A field cannot be named like a LogRecord attribute: logging refuses `extra={"name": ..}`.)"""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        parts = [f'{{"time": "{stamp}.{int(record.msecs):03d}Z", '
                 f'"level": {_quote(record.levelname.lower())}, "logger": {_quote(record.name)}, '
                 f'"message": {_quote(record.getMessage())}']
        for key, value in record.__dict__.items():
            if key not in _HEAD and key[:1] != "_":  # the four above are never repeated
                parts.append(f", {_quote(key)}: {_value(value)}")
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
    root.addHandler(handler)
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


__all__ = ["FORMATS", "LEVELS", "JsonFormatter", "TextFormatter", "announce", "fields",
           "log_format", "log_level", "setup_logging"]
