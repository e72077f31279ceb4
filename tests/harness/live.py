"""The real server in this process on a free loopback port, with clients over a real socket:
tests/conftest.py's `live` fixture, and tests/test_fuzz.py's servers of their own."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import grpc

from recommender._proto.intelliscale.recommender.v1 import recommender_pb2_grpc as pb_grpc
from recommender.core.catalog import Catalog, load_catalog
from recommender.core.usecases import UseCases
from recommender.rpc.server import Running, start
from recommender.store import SqlStore
from tests.harness.stores import sql_store


@dataclass
class Live:
    running: Running
    channel: grpc.Channel
    recommender: pb_grpc.RecommenderStub
    admin: pb_grpc.AdminStub
    store: SqlStore
    address: str


@contextmanager
def serving(store: SqlStore, catalog: Catalog) -> Iterator[Live]:
    """The real server on a free loopback port, with clients over a real socket."""
    running = start(UseCases(store), catalog, host="127.0.0.1", port=0)
    address = f"127.0.0.1:{running.port}"
    channel = grpc.insecure_channel(address)
    try:
        yield Live(running, channel, pb_grpc.RecommenderStub(channel), pb_grpc.AdminStub(channel),
                   store, address)
    finally:
        channel.close()
        running.stop(grace=1)


@contextmanager
def serve(url: str) -> Iterator[Live]:
    """A migrated database at `url` and the real server on a free loopback port."""
    with sql_store(url) as store, serving(store, load_catalog()) as live:
        yield live
