"""Rows are frozen dataclasses, made so on first use rather than at import."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest

from cronjobs.models import Record, field_names


def _fresh() -> Any:
    """A row class defined here, so that no other test has used it yet."""

    class Point(Record):
        x: int
        y: int = 0
        tags: list[str] = dataclasses.field(default_factory=list)

    return Point


def test_a_row_is_made_a_frozen_dataclass_when_first_instantiated() -> None:
    point = _fresh()
    assert not dataclasses.is_dataclass(point)

    p = point(1, y=2)
    assert dataclasses.is_dataclass(point)
    assert (p.x, p.y, p.tags) == (1, 2, [])
    assert p == point(1, 2)
    assert p != point(1, 3)
    assert repr(p).endswith("Point(x=1, y=2, tags=[])")
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 5
    assert dataclasses.replace(p, y=7) == point(1, 7)
    assert point(1).tags is not point(1).tags  # default_factory, as in any dataclass


def test_wrong_arguments_fail_as_with_any_dataclass() -> None:
    point = _fresh()
    with pytest.raises(TypeError):
        point()
    with pytest.raises(TypeError):
        point(1, z=3)
    assert point(4).x == 4  # the failed calls above did not leave the class half made


def test_field_names_before_any_instance() -> None:
    point = _fresh()
    assert field_names(point) == ("x", "y", "tags")
    assert [f.name for f in dataclasses.fields(point)] == ["x", "y", "tags"]


def test_field_names_of_a_plain_dataclass() -> None:
    @dataclasses.dataclass(frozen=True)
    class Plain:
        a: int
        b: str

    assert field_names(Plain) == ("a", "b")


def test_first_instances_from_many_threads_at_once() -> None:
    point = _fresh()
    made: list[Any] = []
    barrier = threading.Barrier(8)

    def make(i: int) -> None:
        barrier.wait()
        made.append(point(i))

    threads = [threading.Thread(target=make, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(p.x for p in made) == list(range(8))


def test_a_row_class_derives_from_record_directly() -> None:
    point = _fresh()

    class Point3(point):  # type: ignore[misc, valid-type]
        z: int = 0

    with pytest.raises(TypeError, match="must derive from Record directly"):
        Point3(1)
