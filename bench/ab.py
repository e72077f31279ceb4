"""Two code trees' servers up at once, their cells interleaved: the fairest before/after on a
machine whose load moves (other work shares its cores).

    python -m bench.ab /path/to/base /path/to/branch [--rounds 8] [--seconds 2] [--callers 16]
                       [--kinds trivial,recommend] [--nodes 0]

Each tree (a checkout with its generated `_proto`) serves in its own spawned child process,
importing `recommender` from that tree, on a fresh SQLite file, with the action's 50 executions
recorded first (as `python -m bench recommend`). Each round runs, for each tree in turn (the
order alternating between rounds), every kind of call for `--seconds` with `--callers` threads
(own channel each); the ratio of each kind to the first (the trivial echo) is taken per round,
so both trees' ratios come from the same minutes. Prints per tree the medians of calls/s and
server CPU per call, and the per-round ratios.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from contextlib import ExitStack
from multiprocessing.connection import Connection


def _child(root: str, database_url: str, conn: Connection) -> None:
    """A server importing `recommender` (and bench.common) from `root`."""
    from bench.common import log_pipe  # this tree's, before `root`'s are imported

    sink = log_pipe()
    sys.path.insert(0, root)
    for name in [m for m in sys.modules if m.split(".")[0] in ("recommender", "bench")]:
        del sys.modules[name]
    import recommender
    from bench import common
    from recommender.cli.logs import setup_logging
    from recommender.rpc.server import freeze_startup_heap

    if not str(recommender.__file__).startswith(root):
        raise RuntimeError(f"{root}: imported {recommender.__file__} instead")
    setup_logging("info", "json", stream=sink)
    running = common.build_server(database_url)
    freeze_startup_heap()
    conn.send(running.port)
    deadline = time.monotonic() + common.SERVER_LIFETIME_S
    try:
        while time.monotonic() < deadline and conn.poll(deadline - time.monotonic()):
            if conn.recv() != "cpu":
                break
            conn.send(time.process_time())
    except EOFError:  # the parent is gone
        pass
    finally:
        running.stop(grace=1)


def main(argv: list[str] | None = None) -> None:
    from bench import common
    from bench.recommend import _check, _maker, bench_request, seed_history

    p = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.split("\n")[0])
    p.add_argument("roots", nargs=2, help="two checkouts (before, after)")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--callers", type=int, default=16)
    p.add_argument("--kinds", default="trivial,recommend",
                   help="bench.recommend's call kinds; the first is the base of the ratios "
                   "(trivial, recommend, 'trivial pair', pair)")
    p.add_argument("--nodes", type=int, default=0, help="8-GPU nodes listed in the request")
    args = p.parse_args(argv)
    kinds: list[str] = args.kinds.split(",")
    roots = [os.path.abspath(r) for r in args.roots]
    ctx = mp.get_context("spawn")
    print(f"{time.strftime('%Y-%m-%d %H:%M')}; load average "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}; {args.callers} callers, "
          f"{args.rounds} rounds x {args.seconds:g} s per cell")
    with ExitStack() as stack:
        servers: list[tuple[str, Connection, str]] = []
        for root in roots:
            url = stack.enter_context(common.fresh_database(None))
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_child, args=(root, url, child), daemon=True)
            proc.start()
            stack.callback(proc.join, 10)
            stack.callback(parent.send, "stop")
            if not parent.poll(60):
                proc.kill()
                raise RuntimeError(f"{root}: server did not start within 60 s")
            servers.append((root, parent, f"127.0.0.1:{parent.recv()}"))
        request = bench_request(nodes=args.nodes)
        for _, _, address in servers:
            seed_history(address)
            for kind in kinds:  # warm: the first calls of each kind fill caches
                common.closed_loop(_maker(address, kind, request), args.callers, 1)

        def cpu(conn: Connection) -> float:
            conn.send("cpu")
            return float(conn.recv())

        rates: dict[tuple[str, str], list[float]] = {
            (r, k): [] for r, _, _ in servers for k in kinds}
        cpus: dict[tuple[str, str], list[float]] = {
            (r, k): [] for r, _, _ in servers for k in kinds}
        for i in range(args.rounds):
            for root, conn, address in (servers if i % 2 == 0 else servers[::-1]):
                for kind in kinds:
                    before = cpu(conn)
                    r = common.closed_loop(_maker(address, kind, request), args.callers,
                                           args.seconds, check=_check)
                    cpus[(root, kind)].append((cpu(conn) - before) * 1000 / max(r.calls, 1))
                    rates[(root, kind)].append(r.rate)
        for root, _, _ in servers:
            print(root)
            for kind in kinds:
                print(f"  {kind}: {statistics.median(rates[(root, kind)]):,.0f} calls/s, "
                      f"{statistics.median(cpus[(root, kind)]):.3f} ms server CPU a call")
            for kind in kinds[1:]:
                rate = [a / b for a, b in zip(rates[(root, kind)], rates[(root, kinds[0])],
                                              strict=True)]
                use = [a / b for a, b in zip(cpus[(root, kind)], cpus[(root, kinds[0])],
                                             strict=True)]
                print(f"  {kind} / {kinds[0]}: calls/s ratio {statistics.median(rate):.3f} "
                      f"(rounds {', '.join(f'{x:.2f}' for x in rate)}), server CPU ratio "
                      f"{statistics.median(use):.2f}")


if __name__ == "__main__":
    main()
