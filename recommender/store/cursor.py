"""Page tokens for lists newest first: a keyset cursor on (created_at, id), so rows added while
an operator pages come before the cursor and a page neither repeats nor skips a row."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, or_

from recommender.store.mapping import utc

Cursor = tuple[datetime, str]


def encode_cursor(created_at: datetime, rec_id: str) -> str:
    raw = json.dumps([utc(created_at).isoformat(), rec_id]).encode()
    return base64.urlsafe_b64encode(raw).decode()


def decode_cursor(token: str) -> Cursor:
    """Raises ValueError on a token we did not make."""
    try:
        created, rec_id = json.loads(base64.urlsafe_b64decode(token.encode()))
        rec_id = str(rec_id)
        if len(rec_id) > 36 or "\x00" in rec_id:
            raise ValueError(rec_id)
        return utc(datetime.fromisoformat(created)), rec_id
    except Exception as e:
        raise ValueError("page_token: not a token this service issued") from e


def after(cursor: Cursor, created_at: Any, row_id: Any) -> ColumnElement[bool]:
    """Rows that come after `cursor` in (created_at, id) descending order."""
    created, rec_id = cursor
    return or_(created_at < created, and_(created_at == created, row_id < rec_id))
