"""Jenkins-style ``H`` fields: croniter's hash of the job's name, worked out directly.

The values are exactly those croniter's ``expand`` makes of the field (``hash_id`` the
per-field key below, every other field ``*``), derived the way croniter 7.0.0's
``HashExpander`` derives them (``croniter/croniter.py``), without expanding a whole
expression: about 2 µs a field instead of 50 to 400 µs, which is what a forecast of a
fleet written with ``H`` pays per job. Equality with croniter is a test
(tests/unit/test_hashing.py, against the installed croniter): every form, every field,
20,000 names, and Hypothesis' names and H texts.

croniter's derivation, for field index ``i`` (minute 0 ... day-of-week 4) and key ``k``:

- ``crc = crc32(k)``, and a value drawn from ``a-b`` is ``a + (crc >> i) % (b - a + 1)``;
- ``H`` draws from the field's range (day-of-week 0-6), ``H(a-b)`` from ``a-b``;
- ``H/n`` and ``H(a-b)/n`` draw a start ``x`` from the first period, ``a`` to
  ``min(a + n - 1, b)``, and step by ``n`` up to ``b`` (``x-b/n``; just ``x`` when it is
  ``b``);
- day-of-week 7 is Sunday, 0 (``H(0-7)`` may draw 7).

Earlier croniter releases drew that start from ``a`` to ``a + n - 1`` without the cap and
without the single-value case, so a step as wide as its range or wider (``H/60`` in the
minute field) came out differently there; every other form is the same in both.
"""

from __future__ import annotations

import re
import zlib

from cronjobs.cron.fields import DAY_OF_MONTH, DAY_OF_WEEK, Field, FieldError

_H_RE = re.compile(r"^H(?:\((\d+)-(\d+)\))?(?:/(\d+))?$", re.IGNORECASE | re.ASCII)
# Monthly jobs stay monthly: a bare H day-of-month is H(1-28), never the 29th-31st.
_MONTHLY = (1, 28)


def parse_hash(f: Field, whole: str, hash_key: str) -> frozenset[int]:
    """The values of the Jenkins-style H field ``whole``, keyed on the job name."""
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
    elif f is DAY_OF_MONTH and step is None:
        low, high = _MONTHLY
    else:  # croniter's range of the field: day-of-week 0-6
        low, high = f.low, 6 if f is DAY_OF_WEEK else f.high
    if step is not None and int(step) == 0:
        raise FieldError(f"{f.name} field '{whole}': a step must be 1 or more, not 0")
    # croniter hashes every field of one key with the same CRC (shifted by the field's
    # position), so minute and hour come out correlated: "H H * * *" would only reach
    # 240 of the 1440 times of day. A key per field makes them independent.
    key = f"{hash_key}\x1f{f.name}".encode()
    return hashed_values(f, key, low, high, None if step is None else int(step))


def hashed_values(f: Field, key: bytes, low: int, high: int,
                  step: int | None) -> frozenset[int]:
    """croniter 7.0.0's ``H(low-high)`` (``step`` None) or ``H(low-high)/step`` in field
    ``f`` with ``hash_id=key`` (HashExpander.do and _expand_divisor), as values."""
    shifted = zlib.crc32(key) >> f.index
    if step is None:
        drawn: range | tuple[int] = (low + shifted % (high - low + 1),)
    else:
        start = low + shifted % (min(low + step - 1, high) - low + 1)
        drawn = range(start, high + 1, step)
    if f is DAY_OF_WEEK:
        return frozenset(0 if v == 7 else v for v in drawn)
    return frozenset(drawn)
