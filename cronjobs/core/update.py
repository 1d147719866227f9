"""``cronjobs define``: create a job, or change the options given of one that exists and
keep the rest, with the diff of what changed.

A command line names what it changes; a jobs file, ``Client.define`` and ``@cronjobs.job``
state the whole job instead (``core.definitions.define``, ``core.apply``). The job is read
and written under its row lock in one transaction, so that two updates of different
options at once both take effect.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from cronjobs.core.apply import JobDiff, job_changes
from cronjobs.core.crowding import OFF
from cronjobs.core.declarations import fields_of, masked
from cronjobs.core.definitions import DefineResult, crowding, define
from cronjobs.core.spec import build_spec, reset_fields, update_spec
from cronjobs.db.store import Store
from cronjobs.errors import UsageError
from cronjobs.models import Kind
from cronjobs.validation import check_name

PLACEHOLDER = "@daily"  # checks the options given before the job is read, when no SCHEDULE is


@dataclass(frozen=True)
class Defined:
    """What a define did: its result, and for a job that existed the diff (its changes:
    none when it was unchanged)."""

    result: DefineResult
    diff: JobDiff | None  # None: the job was created


def define_given(store: Store, name: str, schedule: str | None, given: Mapping[str, Any], *,
                 reset: Iterable[str] = (), replace_target: bool = False,
                 handlers: Callable[[], Collection[str] | None] = lambda: None,
                 crowded_threshold: int | None = None) -> Defined:
    """Define job ``name``: a new one from ``schedule`` and the options ``given`` (by
    ``core.spec.FIELDS`` name; the others take their defaults); one that exists with the
    options given changed, those named in ``reset`` back to their defaults, and the rest
    kept (``schedule`` None: kept too). A change of kind (a command given to a handler job,
    a handler to a command job) needs ``replace_target``. Bad input raises a UsageError and
    writes nothing. ``handlers``: the registered handler names (None: no --app module),
    asked only when the job runs a handler."""
    check_name(name)
    fields = reset_fields(reset)
    build_spec(name=name, schedule=PLACEHOLDER if schedule is None else schedule, **given)
    with store.transaction():
        existing = store.definitions.definition_by_name(name, for_update=True)
        if existing is None and schedule is None:
            raise UsageError(f"no job named {name!r}: give its SCHEDULE to create it")
        if existing is None:
            spec = build_spec(name=name, schedule=schedule or PLACEHOLDER, **given)
        else:
            spec = update_spec(existing, schedule=schedule, reset=fields,
                               replace_target=replace_target, **given)
        known = handlers() if spec.kind is Kind.HANDLER else None
        result = define(store, spec, known_handlers=known, crowded_threshold=OFF)
        diff = None if existing is None else JobDiff(
            name, "change", masked(fields_of(spec)), job_changes(existing, spec))
    return Defined(replace(result, crowding=crowding(store, result.definition,
                                                     crowded_threshold)), diff)
