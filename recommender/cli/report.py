"""`recommender report`: the self-contained HTML report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from recommender.cli.options import database_url

if TYPE_CHECKING:
    pass


def cmd_report(args: argparse.Namespace) -> int:
    from recommender.report import render_report
    from recommender.store import SqlStore, connect

    store = SqlStore(connect(database_url(args)))
    page = render_report(store, action_id=args.action or None, limit=args.limit,
                         top_actions=args.top)
    out = Path(args.out)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out)  # a reader never sees half a page
    print(f"wrote {out} ({len(page.encode()) / 1024:,.0f} KiB); open it in a browser, "
          "it needs no network")
    return 0
