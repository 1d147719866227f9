"""H worked out directly (cronjobs.cron.hashing) is croniter's H, value for value: croniter
stays the oracle, called here and never on the schedule engine's path."""

from __future__ import annotations

import binascii
import itertools
import zlib
from typing import Any

import pytest
from croniter import croniter
from croniter.croniter import CroniterError
from hypothesis import given, settings
from hypothesis import strategies as st

from cronjobs.cron import hash_fields, parse
from cronjobs.cron.fields import FIELDS, Field, FieldError, full
from cronjobs.cron.hashing import hashed_values, parse_hash

# croniter's own range of each field (day-of-week 0-6); cronjobs accepts 7 as a bound too.
CRONITER_RANGE = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
NAMES = 20_000


def croniter_values(index: int, raw: list[Any]) -> frozenset[int]:
    """One field of croniter.expand's answer as values (a '*' is the whole field)."""
    if "*" in raw:
        return full(FIELDS[index])
    return frozenset(0 if index == 4 and int(v) == 7 else int(v) for v in raw)


def expand(probe: list[str], key: bytes) -> list[frozenset[int]]:
    raw = croniter.expand(" ".join(probe), hash_id=key)[0]
    return [croniter_values(i, raw[i]) for i in range(5)]


def forms(f: Field) -> list[list[tuple[str, int, int, int | None]]]:
    """Every H form of the field, by kind: (text, low, high, step) with the range croniter
    draws from. H/n with every step up to past the field's width; H(a-b) and H(a-b)/n with
    every range cronjobs accepts (day-of-week up to 7) and, for the stepped one, a spread of
    steps."""
    low, high = CRONITER_RANGE[f.index]
    width = high - low + 1
    bare = [("H(1-28)", 1, 28, None)] if f.index == 2 else [("H", low, high, None)]
    steps = [(f"H/{n}", low, high, n) for n in range(1, width + 3)]
    pairs = [(a, b) for a in range(f.low, f.high + 1) for b in range(a + 1, f.high + 1)]
    ranged = [(f"H({a}-{b})", a, b, None) for a, b in pairs]
    stepped = [(f"H({a}-{b})/{n}", a, b, n) for (a, b), n in
               itertools.product(pairs, (1, 2, 3, 4, 5, 7, 10, 13, 15, 30, 45, 100))]
    return [bare, steps, ranged, stepped]


FORMS = [forms(f) for f in FIELDS]


def test_every_form_of_every_field_over_many_names_is_croniters() -> None:
    # 20,000 names x 4 kinds of H (H, H/n, H(a-b), H(a-b)/n) x 5 fields, the forms of each
    # kind taken in turn (with a stride, so neighbours differ): one croniter.expand with
    # all five fields hashed per name and kind, compared field by field.
    checked = 0
    for i in range(NAMES):
        key = f"job-{i}\x1ffield".encode()
        for kind in range(4):
            chosen = []
            for f in FIELDS:
                kinds = FORMS[f.index][kind]
                chosen.append(kinds[(i * 7919 + f.index) % len(kinds)])
            expected = expand([text.lower() for text, *_ in chosen], key)
            for f, (text, low, high, step) in zip(FIELDS, chosen, strict=True):
                assert hashed_values(f, key, low, high, step) == expected[f.index], (
                    f.name, text, key)
                checked += 1
    assert checked == NAMES * 4 * 5


def test_every_form_is_covered_by_the_sweep() -> None:
    for f in FIELDS:
        for kinds in FORMS[f.index]:
            seen = {(i * 7919 + f.index) % len(kinds) for i in range(NAMES)}
            assert len(seen) == min(len(kinds), NAMES)


@pytest.mark.parametrize("f", FIELDS, ids=lambda f: f.name)
def test_parse_hash_with_its_per_field_key_is_croniters(f: Field) -> None:
    # The engine's entry point: the key is the name and the field's, H day-of-month is
    # H(1-28); every form of the field, each with 20 names (a name of its own for each of
    # the thousands of H(a-b)/n forms).
    for kind in FORMS[f.index]:
        names = 20 if len(kind) < 1000 else 1
        for number, (text, *_) in enumerate(kind):
            for i in range(number, number + names):
                name = f"n{i}"
                probe = ["*"] * 5
                probe[f.index] = "h(1-28)" if text == "H" and f.index == 2 else text.lower()
                key = f"{name}\x1f{f.name}".encode()
                assert parse_hash(f, text, name) == expand(probe, key)[f.index], (text, name)


def test_the_crc_is_croniters() -> None:
    # croniter: binascii.crc32(hash_id) & 0xFFFFFFFF; zlib's is the same unsigned CRC-32.
    for i in range(1000):
        key = f"job-{i}".encode()
        assert zlib.crc32(key) == binascii.crc32(key) & 0xFFFFFFFF


@settings(max_examples=400, deadline=None)
@given(name=st.text(max_size=40), index=st.integers(0, 4), kind=st.integers(0, 3),
       low=st.integers(-1, 62), high=st.integers(-1, 62), step=st.integers(0, 70))
def test_any_name_and_any_h_text_is_croniters(name: str, index: int, kind: int, low: int,
                                              high: int, step: int) -> None:
    # Any name (any Unicode), any H text, in range or not: the same values as croniter, or
    # rejected by both.
    f = FIELDS[index]
    text = ["H", f"H/{step}", f"H({low}-{high})", f"H({low}-{high})/{step}"][kind]
    probe = ["*"] * 5
    probe[index] = "h(1-28)" if text == "H" and index == 2 else text.lower()
    key = f"{name}\x1f{f.name}".encode()
    try:
        expected: frozenset[int] | None = expand(probe, key)[index]
    except (CroniterError, ValueError):
        expected = None
    try:
        found: frozenset[int] | None = parse_hash(f, text, name)
    except FieldError:
        found = None
    assert found == expected


@pytest.mark.parametrize("expression", ["H 3 * * *", "H H * * *", "H/15 * * * *",
                                        "H(0-29) 2 * * *", "0 0 H * *", "H 4 * * 1-5",
                                        "H H H H H", "H(0-7)/2 H/6 H/3 H/5 h(1-5)"])
def test_what_a_name_makes_of_the_h_fields_decides_the_schedule(expression: str) -> None:
    # hash_fields is what the key changes: equal answers, equal compiled schedules, and
    # different answers, different ones (the forecast groups H jobs by it).
    by_fields: dict[object, str] = {}
    by_canonical: dict[str, object] = {}
    for i in range(2000):
        name = f"job-{i}"
        fields = hash_fields(expression, name)
        assert fields is not None
        canonical = parse(expression, hash_key=name).canonical
        assert by_fields.setdefault(fields, canonical) == canonical
        assert by_canonical.setdefault(canonical, fields) == fields
    assert len(by_fields) > 1


def test_hash_fields_of_expressions_without_valid_h() -> None:
    assert hash_fields("0 3 * * *", "a") == (None,) * 5
    assert hash_fields("0 3 * * thu", "a") == (None,) * 5
    assert hash_fields("H 3 * * *", "a") == (parse_hash(FIELDS[0], "H", "a"),
                                              None, None, None, None)
    for bad in ("@daily", "H(5-3) * * * *", "H * * *", "H,1 * * * *", "H(0-60) * * * *",
                "", "H/0 * * * *", "x" * 300):
        assert hash_fields(bad, "a") is None, bad
