"""Helpers every output shares: JSON text, instants in JSON, aligned tables, ranges of
slots."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Sequence
from typing import Any

from cronjobs.timefmt import Times, iso


def to_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False, ensure_ascii=False)


instant = iso  # every instant in JSON: ISO 8601 in UTC (cronjobs.timefmt)


def seconds(value: dt.timedelta | None) -> int | None:
    return None if value is None else int(value.total_seconds())


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """An aligned plain-text table."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in cells]
    return "\n".join(lines)


def slot_range(first: dt.datetime, last: dt.datetime, count: int | None, times: Times) -> str:
    """A slot, or a stretch of slots and how many (a tick's decisions, explain)."""
    if first == last:
        return times.at(first)
    many = f"{count:,} slots" if count is not None else "many slots"
    return f"{times.span(first, last)}  ({many})"
