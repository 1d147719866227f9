"""Jenkins-style ``H`` fields, expanded by croniter's hash of the job's name."""

from __future__ import annotations

import functools
import re
from typing import Any

from cronjobs.cron.fields import DAY_OF_MONTH, DAY_OF_WEEK, Field, FieldError, full

_H_RE = re.compile(r"^H(?:\((\d+)-(\d+)\))?(?:/(\d+))?$", re.IGNORECASE | re.ASCII)


def parse_hash(f: Field, whole: str, hash_key: str) -> frozenset[int]:
    """Expand a Jenkins-style H field with croniter, keyed on the job name."""
    match = _H_RE.match(whole)
    if match is None:
        if "," in whole:
            raise FieldError(
                f"{f.name} field '{whole}': H must be the whole field "
                "(H, H/15, H(0-29) or H(0-29)/10)"
            )
        raise FieldError(
            f"{f.name} field '{whole}' is not a valid H form: use H, H/15, H(0-29) or "
            "H(0-29)/10 (with numbers)"
        )
    begin, end, step = match.groups()
    if begin is not None and end is not None:
        low, high = int(begin), int(end)
        for bound in (low, high):
            if not f.low <= bound <= f.high:
                raise FieldError(
                    f"{f.name} field '{whole}': {bound} is out of range {f.low}-{f.high}"
                )
        if low >= high:
            raise FieldError(
                f"{f.name} field '{whole}': the H range must go up, e.g. H(0-29)"
            )
    if step is not None and int(step) == 0:
        raise FieldError(f"{f.name} field '{whole}': a step must be 1 or more, not 0")
    text = whole.upper()
    if f is DAY_OF_MONTH and text == "H":
        # Keep "monthly" jobs monthly: never the 29th-31st, which some months lack.
        text = "H(1-28)"
    # croniter hashes every field of one key with the same CRC (shifted by the field's
    # position), so minute and hour come out correlated: "H H * * *" would only reach
    # 240 of the 1440 times of day. A key per field makes them independent.
    key = f"{hash_key}\x1f{f.name}".encode()
    return _expanded(f, text.lower(), key)


@functools.lru_cache(maxsize=4096)
def _expanded(f: Field, text: str, key: bytes) -> frozenset[int]:
    """croniter's public ``expand`` of the H field ``text`` keyed on ``key``, with every
    other field ``*``; the field's values as Debian reads them."""
    # Deferred to the first H field: croniter (with dateutil) costs every tick about 9 ms
    # to import (bench/empty_tick.py), and only H fields need it.
    from croniter import croniter  # type: ignore[import-untyped, unused-ignore]  # noqa: PLC0415

    probe = ["*"] * 5
    probe[f.index] = text
    try:
        expanded: Any = croniter.expand(" ".join(probe), hash_id=key)
    except (ValueError, TypeError) as exc:  # pragma: no cover - validated above
        raise FieldError(f"{f.name} field '{text}' is not valid: {exc}") from exc
    return _croniter_values(f, expanded[0][f.index])


def _croniter_values(f: Field, raw: list[Any]) -> frozenset[int]:
    """The values in one field of croniter's expansion (day-of-week 7 folded into 0); a
    '*' anywhere in it (``1,*``) lifts the restriction, for croniter as for Debian."""
    if "*" in raw:
        return full(f)
    return frozenset(0 if (f is DAY_OF_WEEK and int(v) == 7) else int(v) for v in raw)
