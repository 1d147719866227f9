"""``cronjobs apply``: make the database match the declared jobs, with a diff first; and
``cronjobs export``: the definitions as declarations again.

An apply is one transaction under an advisory lock, so that many pods applying the same
file at once end as one apply would (the first writes, the others find nothing to change).
Added and changed jobs go through ``define`` (a changed schedule continues from now, and
the old schedule's undecided slots are recorded as superseded); removed ones through
``remove`` (their history stays). Ownership: a definition records the source that created
it; ``prune`` removes only the source's own definitions that are no longer declared, and a
declared name owned by someone else (made by hand, or another source's) is a conflict
unless ``adopt``.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from cronjobs.core.crowding import OFF, Crowding, check_apply
from cronjobs.core.declarations import SECRET_FIELDS, declared_fields, fields_of, masked
from cronjobs.core.definitions import define, get
from cronjobs.core.spec import FIELDS, RESETTABLE, build_spec
from cronjobs.db.store import Store
from cronjobs.errors import Refused
from cronjobs.models import Definition, DefinitionSpec
from cronjobs.validation import check_name


@dataclass(frozen=True)
class FieldChange:
    """One field's old and new value, as they may be shown: a secret (the notify URLs) is
    masked, so old and new may look the same when only a URL's secret part changed."""

    field: str
    old: Any
    new: Any
    default: bool = False  # the new value is the field's default (a jobs file's key left
    # out, or `define --reset`)


@dataclass(frozen=True)
class JobDiff:
    """What apply does (or would do) to one job."""

    name: str
    action: str  # "add", "change" or "remove"
    fields: dict[str, Any]  # the declared fields (add, change), or the removed job's;
    # secrets masked
    changes: tuple[FieldChange, ...] = ()
    adopted_from: str | None = None  # with adopt: the owner before ("" for hand-made)
    cancelled_runs: int = 0  # remove: its waiting runs, cancelled
    warning: str | None = None  # e.g. no loaded --app module registers its handler
    crowding: Crowding | None = None  # it lands in a crowded minute (a warning)


@dataclass(frozen=True)
class ApplyResult:
    source: str
    dry_run: bool
    added: tuple[JobDiff, ...]
    changed: tuple[JobDiff, ...]
    removed: tuple[JobDiff, ...]
    unchanged: int
    not_declared: tuple[str, ...]  # the source's jobs no longer declared (kept: no prune)

    @property
    def in_sync(self) -> bool:
        """Nothing to change: the database already matched the declarations."""
        return not (self.added or self.changed or self.removed)

    @property
    def change_count(self) -> int:
        return len(self.added) + len(self.changed) + len(self.removed)


@dataclass(frozen=True)
class Export:
    """Definitions as declarations: the source they share (if one), name -> fields; and the
    jobs whose notify URLs were masked (exported without ``show_secrets``), which apply
    refuses until the real URLs are written back."""

    source: str | None
    jobs: dict[str, dict[str, Any]]
    masked: tuple[str, ...] = ()


def default_source(file: str | None, modules: Sequence[str]) -> str:
    """The source apply records when none is named: ``file:NAME`` for a jobs file (its name
    without the directory, the same from any checkout), ``app:MODULES`` for modules."""
    parts = []
    if file is not None:
        parts.append(f"file:{os.path.basename(file) or file}")
    if modules:
        parts.append(f"app:{','.join(modules)}")
    return " + ".join(parts) or "app"


def owner(source: str | None) -> str:
    """Who owns a definition, in words."""
    return "made by hand (define)" if source is None else f"of source {source!r}"


def apply(store: Store, specs: Sequence[DefinitionSpec], *, source: str, prune: bool = False,
          adopt: bool = False, dry_run: bool = False,
          known_handlers: Collection[str] | None = None,
          crowded_threshold: int | None = None) -> ApplyResult:
    """Diff ``specs`` against the database and, unless ``dry_run``, apply the difference in
    one transaction. Conflicting names refuse the whole apply (Refused) unless ``adopt``.
    An added job, or one whose schedule or zone changes, landing in a minute that holds more
    than ``crowded_threshold`` fires of the other jobs as they will be (None: the default;
    ``forecast.OFF``: not checked) gets a warning in its diff."""
    with store.transaction(rollback=dry_run):
        store.definitions.lock_apply()
        current = {summary.definition.name: summary.definition
                   for summary in store.definitions.list_definitions()}
        added, changed, conflicts, unchanged = _diff(specs, current, source, adopt)
        if conflicts:
            named = ", ".join(f"{name!r} ({owner(current[name].source)})" for name in conflicts)
            raise Refused(f"declared jobs already exist and are not of source {source!r}: "
                          f"{named}; use --adopt to take them over")
        declared = {spec.name for spec in specs}
        stale = sorted(name for name, d in current.items()
                       if d.source == source and name not in declared)
        removed = tuple(JobDiff(name, "remove", masked(fields_of(current[name])))
                        for name in stale) if prune else ()
        added, changed = _crowding(store, specs, current, added, changed,
                                   [d.name for d in removed], crowded_threshold)
        if dry_run:
            return ApplyResult(source, True, added, changed, removed, unchanged,
                               () if prune else tuple(stale))
        by_name = {spec.name: spec for spec in specs}
        now = store.now()
        added = tuple(_write(store, by_name[d.name], d, source, known_handlers) for d in added)
        changed = tuple(_write(store, by_name[d.name], d, source, known_handlers)
                        for d in changed)
        for diff in changed:
            if diff.adopted_from is not None:
                store.definitions.adopt_definition(current[diff.name].id, source=source, now=now)
        done = []
        for diff in removed:
            _, cancelled = store.definitions.remove_definition(current[diff.name].id, now=now)
            done.append(JobDiff(diff.name, "remove", diff.fields, cancelled_runs=cancelled))
        return ApplyResult(source, False, added, changed, tuple(done), unchanged,
                           () if prune else tuple(stale))


def _diff(specs: Iterable[DefinitionSpec], current: dict[str, Definition], source: str,
          adopt: bool) -> tuple[tuple[JobDiff, ...], tuple[JobDiff, ...], list[str], int]:
    added: list[JobDiff] = []
    changed: list[JobDiff] = []
    conflicts: list[str] = []
    unchanged = 0
    for spec in specs:
        shown = masked(fields_of(spec))
        existing = current.get(spec.name)
        if existing is None:
            added.append(JobDiff(spec.name, "add", shown))
            continue
        changes = job_changes(existing, spec)
        if existing.source != source:
            if not adopt:
                conflicts.append(spec.name)
                continue
            changed.append(JobDiff(spec.name, "change", shown, changes,
                                   adopted_from=existing.source or ""))
        elif changes:
            changed.append(JobDiff(spec.name, "change", shown, changes))
        else:
            unchanged += 1
    return tuple(added), tuple(changed), conflicts, unchanged


def job_changes(existing: Definition, spec: DefinitionSpec) -> tuple[FieldChange, ...]:
    """What defining ``spec`` changes of the job that exists: each field whose value
    differs, compared in full (a changed token is a change) and shown masked, marked when
    it returns to its default (not the schedule, command or handler: they have none); and
    a stored definition found invalid, made valid."""
    old, new = fields_of(existing), fields_of(spec)
    shown_old, shown_new = masked(old), masked(new)
    defaults = fields_of(build_spec(name=spec.name, schedule=spec.schedule))
    changes = tuple(FieldChange(field.name, shown_old[field.name], shown_new[field.name],
                                default=field in RESETTABLE
                                and new[field.name] == defaults[field.name])
                    for field in FIELDS if old[field.name] != new[field.name])
    if existing.invalid_reason is not None:
        changes += (FieldChange("invalid", existing.invalid_reason, None),)
    return changes


def _crowding(store: Store, specs: Sequence[DefinitionSpec], current: dict[str, Definition],
              added: tuple[JobDiff, ...], changed: tuple[JobDiff, ...],
              removed: Sequence[str], threshold: int | None
              ) -> tuple[tuple[JobDiff, ...], tuple[JobDiff, ...]]:
    """The diffs with the crowded-minute warnings of the jobs added or newly timed."""
    timed = {d.name for d in added} | {d.name for d in changed
                                       if any(c.field in ("schedule", "tz") for c in d.changes)}
    if not timed or threshold == OFF:
        return added, changed
    paused = {name: (d.paused_at, d.paused_until) for name, d in current.items()}
    found = check_apply(store, specs, threshold, paused=paused, removed=removed)

    def marked(diff: JobDiff) -> JobDiff:
        if diff.name not in timed or diff.name not in found:
            return diff
        return replace(diff, crowding=found[diff.name])

    return tuple(map(marked, added)), tuple(map(marked, changed))


def _write(store: Store, spec: DefinitionSpec, diff: JobDiff, source: str,
           known_handlers: Collection[str] | None) -> JobDiff:
    known = known_handlers if known_handlers is not None else None
    result = define(store, spec, known_handlers=known, preview=0, source=source,
                    crowded_threshold=OFF)
    warning = result.warning if known_handlers is not None else None
    return replace(diff, warning=warning)


def export(store: Store, names: Sequence[str] = (), *, show_secrets: bool = False) -> Export:
    """The named jobs (default: every job) as declarations; applying them again (with the
    source they share) changes nothing. The notify URLs are secrets: masked unless
    ``show_secrets`` (and a masked URL is refused by apply)."""
    if names:
        definitions = [get(store, check_name(name)) for name in dict.fromkeys(names)]
    else:
        definitions = [summary.definition for summary in store.definitions.list_definitions()]
    sources = {d.source for d in definitions}
    shared = sources.pop() if len(sources) == 1 else None
    jobs = {d.name: declared_fields(d) for d in definitions}
    hidden = tuple(name for name, fields in jobs.items()
                   if any(fields.get(field) for field in SECRET_FIELDS))
    if show_secrets or not hidden:
        return Export(shared, jobs)
    return Export(shared, {name: masked(fields) for name, fields in jobs.items()}, hidden)
