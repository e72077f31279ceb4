"""Client threads that call a server and keep a ledger of every call: method, timing, status."""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

CALL_TIMEOUT_S = 10.0
"""Client deadline of every call: a call this slow is a hang (the database timeout is 2 s)."""

OK = grpc.StatusCode.OK
UNAVAILABLE = grpc.StatusCode.UNAVAILABLE


@dataclass
class Call:
    method: str
    started: float
    ended: float
    code: grpc.StatusCode
    details: str = ""
    reply: Any = None
    key: str = ""  # the execution id of a RecordExecution

    @property
    def seconds(self) -> float:
        return self.ended - self.started

    def describe(self) -> str:
        return f"{self.method}({self.key}) {self.code.name} after {self.seconds:.2f} s: " \
               f"{self.details}"


def call(method: str, fn: Callable[..., Any], message: Any, key: str = "",
         timeout: float = CALL_TIMEOUT_S) -> Call:
    started = time.monotonic()
    try:
        reply = fn(message, timeout=timeout)
    except grpc.RpcError as e:
        return Call(method, started, time.monotonic(), e.code(), e.details() or "", key=key)
    return Call(method, started, time.monotonic(), OK, reply=reply, key=key)


@dataclass
class Ledger:
    """What the clients saw, shared by their threads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    calls: list[Call] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def add(self, c: Call) -> Call:
        with self.lock:
            self.calls.append(c)
        return c

    def error(self, message: str) -> None:
        with self.lock:
            self.errors.append(message)

    def of(self, method: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.method == method]


def run_clients(n: int, body: Callable[[int], None], ledger: Ledger) -> list[threading.Thread]:
    def guarded(k: int) -> None:
        try:
            body(k)
        except Exception:
            ledger.error(f"client {k} crashed: {traceback.format_exc()}")

    threads = [threading.Thread(target=guarded, args=(k,), name=f"client-{k}", daemon=True)
               for k in range(n)]
    for t in threads:
        t.start()
    return threads


def join_clients(threads: list[threading.Thread], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    alive = [t.name for t in threads if t.is_alive()]
    assert not alive, f"client threads still running after {timeout:.0f} s (a hang?): {alive}"


def healthy(address: str) -> bool:
    with grpc.insecure_channel(address) as ch:
        status = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(),
                                                        timeout=5).status
    return bool(status == health_pb2.HealthCheckResponse.SERVING)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] if ordered else 0.0


def latency_summary(calls: list[Call]) -> str:
    seconds = [c.seconds for c in calls]
    return (f"{len(calls)} calls, p50 {percentile(seconds, 50) * 1000:.0f} ms, "
            f"p99 {percentile(seconds, 99) * 1000:.0f} ms, max {max(seconds, default=0):.2f} s")
