"""`recommender report`: the self-contained HTML report."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from recommender.cli.options import ConfigError, open_existing, writable_file

if TYPE_CHECKING:
    pass


def cmd_report(args: argparse.Namespace) -> int:
    from recommender.report import render_report
    from recommender.store import SqlStore

    out = writable_file(args.out, "--out")  # before the minutes of reading and drawing
    store = SqlStore(open_existing(args))
    page = render_report(store, action_id=args.action or None, limit=args.limit,
                         top_actions=args.top)
    tmp = out.with_name(out.name + ".tmp")
    try:
        tmp.write_text(page, encoding="utf-8")
        tmp.replace(out)  # a reader never sees half a page
    except OSError as e:  # the disk filled up, or the folder went away meanwhile
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"--out {args.out}: {e.strerror}") from None
    print(f"wrote {out} ({len(page.encode()) / 1024:,.0f} KiB); open it in a browser, "
          "it needs no network")
    return 0
