"""Jobs declared as code: the jobs file (TOML, read with the standard library's tomllib) and
the ``@cronjobs.job(name, schedule=...)`` decorator, turned into DefinitionSpecs by the same
validation as ``cronjobs define`` (``core.spec.build_spec``); and definitions written back in
the file's format (``cronjobs export``).

A declaration's fields are those of ``core.spec.FIELDS``: ``define``'s options under their
Python names (``tz``, ``starting_deadline``, ``max_attempts``...). A bad one is an
InvalidDefinition (exit 2) that names the file and line, or the decorated function, the job
and the field.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cronjobs.core.definitions import validate_spec
from cronjobs.core.spec import BY_NAME, FIELDS, build_spec
from cronjobs.errors import InvalidDefinition, UsageError
from cronjobs.models import Definition, DefinitionSpec
from cronjobs.validation import check_name, check_text, mask_url

MAX_FILE_BYTES = 4 * 1024 * 1024

_OPTION = re.compile(r"--([a-z]+(?:-[a-z]+)*)")
_HEADER = re.compile(r"^\s*\[\s*jobs\s*\.\s*(.+?)\s*\]\s*(?:#.*)?$")
MASK = "***"  # what mask_url puts in place of a URL's secret part
SECRET_FIELDS = tuple(field.name for field in FIELDS if field.secret)  # shown masked


@dataclass(frozen=True)
class Declaration:
    """One job as declared: its name, its fields as written, and where (for messages)."""

    name: str
    fields: dict[str, Any]
    where: str


@dataclass(frozen=True)
class JobsFile:
    """A parsed jobs file: its declarations and the ``source`` it names (if any)."""

    path: str
    source: str | None
    declarations: tuple[Declaration, ...]


def read_jobs_file(path: str | Path) -> JobsFile:
    """Parse the jobs file at ``path``: a TOML document with an optional top-level
    ``source = "name"`` and one ``[jobs.NAME]`` table per job. Checks the structure and
    every field's type; the values are checked by :func:`to_specs`."""
    shown = str(path)
    if "\x00" in shown:
        raise InvalidDefinition("cannot read jobs file: its path contains a NUL character")
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise InvalidDefinition(f"cannot read jobs file {shown}: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise InvalidDefinition(f"{shown}: larger than {MAX_FILE_BYTES // 1024 // 1024} MiB")
    try:
        text = raw.decode("utf-8")
        document = tomllib.loads(text)
    except UnicodeDecodeError as exc:
        raise InvalidDefinition(f"{shown}: not UTF-8 text ({exc.reason} at byte "
                                f"{exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        hint = ("" if Path(path).suffix.lower() == ".toml" else
                " (jobs files are TOML, as `cronjobs export` writes them: not YAML or JSON)")
        raise InvalidDefinition(f"{shown}: invalid TOML: {exc}{hint}") from None
    return parse_document(document, shown, _header_lines(text))


def parse_document(document: Mapping[str, Any], shown: str,
                   lines: Mapping[str, int] | None = None) -> JobsFile:
    """The declarations of an already parsed document (``read_jobs_file``'s second half)."""
    lines = lines or {}
    unknown = sorted(set(document) - {"source", "jobs"})
    if unknown:
        raise InvalidDefinition(f"{shown}: unknown top-level key {unknown[0]!r} (expected "
                                "'source' and [jobs.NAME] tables)")
    source = document.get("source")
    if source is not None:
        if not isinstance(source, str):
            raise InvalidDefinition(f"{shown}: 'source' must be text, got {_kind(source)}")
        source = _checked_source(source, where=shown)
    jobs = document.get("jobs", {})
    if not isinstance(jobs, dict):
        raise InvalidDefinition(f"{shown}: 'jobs' must be a table of [jobs.NAME] tables")
    declarations = []
    for name, fields in jobs.items():
        where = f"{shown}:{lines[name]}" if name in lines else shown
        if not isinstance(fields, dict):
            raise InvalidDefinition(f"{where}: job {name!r} must be a table ([jobs.{name}]), "
                                    f"got {_kind(fields)}")
        declarations.append(Declaration(name, dict(fields), where))
    return JobsFile(shown, source, tuple(declarations))


def check_source(source: str) -> str:
    return _checked_source(source, where="--source")


def _checked_source(source: str, *, where: str) -> str:
    if not source.strip() or len(source) > 200:
        raise InvalidDefinition(f"{where}: invalid source {source[:60]!r}: 1 to 200 characters")
    try:
        return check_text(source, what="source")
    except UsageError as exc:
        raise InvalidDefinition(f"{where}: {exc.message}") from None


def _header_lines(text: str) -> dict[str, int]:
    """The line of each ``[jobs.NAME]`` header, by job name (bare or quoted)."""
    found: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = _HEADER.match(line)
        if match:
            key = match.group(1)
            if len(key) >= 2 and key[0] == key[-1] and key[0] in "\"'":
                key = key[1:-1]
            found.setdefault(key, number)
    return found


def to_specs(declarations: Iterable[Declaration]) -> list[DefinitionSpec]:
    """Validate every declaration (all or nothing): the first problem raises an
    InvalidDefinition naming where, the job and the field. A name declared twice is one."""
    seen: dict[str, str] = {}
    specs = []
    for declaration in declarations:
        if declaration.name in seen:
            raise InvalidDefinition(
                f"{declaration.where}: job {declaration.name!r} is declared twice (also at "
                f"{seen[declaration.name]})")
        seen[declaration.name] = declaration.where
        specs.append(to_spec(declaration))
    return specs


def to_spec(declaration: Declaration) -> DefinitionSpec:
    name, fields, where = declaration.name, declaration.fields, declaration.where
    try:
        check_name(name)
    except UsageError as exc:
        raise InvalidDefinition(f"{where}: {exc.message}") from None
    prefix = f"{where}: job {name!r}"
    unknown = sorted(set(fields) - set(BY_NAME))
    if unknown:
        raise InvalidDefinition(f"{prefix}: unknown field {unknown[0]!r} (known: "
                                f"{', '.join(BY_NAME)})")
    if "schedule" not in fields:
        raise InvalidDefinition(f"{prefix}: field 'schedule' is missing")
    options: dict[str, Any] = {}
    for field, value in fields.items():
        options[field] = _typed(prefix, field, value)
    if any(MASK in url for url in options.get("notify", ())):
        raise InvalidDefinition(f"{prefix}: field 'notify': URL is masked (export with "
                                "--show-secrets or write the real URL)")
    try:
        spec = build_spec(name=name, **options)
        validate_spec(spec)
    except UsageError as exc:
        message = _OPTION.sub(lambda m: m.group(1).replace("-", "_"), exc.message)
        if message.startswith("unknown time zone"):
            message = f"field 'tz': {message}"
        raise InvalidDefinition(f"{prefix}: {message}") from None
    return spec


def _typed(prefix: str, field: str, value: Any) -> Any:
    """A field's value as build_spec takes it, or an error naming the field and the type."""
    kind = BY_NAME[field].form
    if kind in ("urls", "events"):
        return _texts(prefix, field, value)
    if kind == "table":
        if isinstance(value, str):
            return value
        if not isinstance(value, dict):
            raise InvalidDefinition(f"{prefix}: field 'payload' must be a table or a JSON "
                                    f"object in a string, got {_kind(value)}")
        try:
            return json.dumps(value, allow_nan=False, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise InvalidDefinition(f"{prefix}: field 'payload' is not JSON: "
                                    f"{str(exc).splitlines()[0]}") from None
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidDefinition(f"{prefix}: field {field!r} must be an integer, got "
                                    f"{_kind(value)}")
        return value
    if kind == "boolean":
        if not isinstance(value, bool):
            raise InvalidDefinition(f"{prefix}: field {field!r} must be true or false, got "
                                    f"{_kind(value)}")
        return value
    if kind == "duration" and isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # bare seconds, as on the command line
    if not isinstance(value, str):
        expected = "a duration such as \"1h\"" if kind == "duration" else "text"
        raise InvalidDefinition(f"{prefix}: field {field!r} must be {expected}, got "
                                f"{_kind(value)}")
    return value


def _texts(prefix: str, field: str, value: Any) -> tuple[str, ...]:
    """notify (URLs) and notify_on (events): an array of text, or one text (for notify_on,
    comma-separated as on the command line)."""
    if isinstance(value, str):
        return (value,)
    expected = ("a URL or an array of URLs" if field == "notify"
                else "an array of events or comma-separated text")
    if not isinstance(value, list | tuple):
        raise InvalidDefinition(f"{prefix}: field {field!r} must be {expected}, got "
                                f"{_kind(value)}")
    for item in value:
        if not isinstance(item, str):
            raise InvalidDefinition(f"{prefix}: field {field!r} must be {expected}, got "
                                    f"an array holding {_kind(item)}")
    if field == "notify_on" and not value:
        raise InvalidDefinition(f"{prefix}: field 'notify_on' is empty (use dead, failure or "
                                "recovery; leave it out for dead and recovery)")
    return tuple(value)


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "text"
    return f"a {type(value).__name__}"


# -- definitions as declared fields (diffs and export) --------------------------------------------

def fields_of(job: DefinitionSpec | Definition) -> dict[str, Any]:
    """Every field of a job as the jobs file writes it: what apply compares and export
    writes (durations as ``1h30m``, no value as ``none``)."""
    return {field.name: field.write(getattr(job, field.column)) for field in FIELDS}


def masked(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` as they may be shown: the notify URLs masked (they are secrets)."""
    shown = dict(fields)
    for field in SECRET_FIELDS:
        if shown.get(field):
            shown[field] = [mask_url(str(url)) for url in shown[field]]
    return shown


def declared_fields(job: Definition) -> dict[str, Any]:
    """The fields of a definition that differ from the defaults (the schedule always):
    what ``export`` writes, which declares the same job again."""
    everything = fields_of(job)
    defaults = fields_of(build_spec(name=job.name, schedule=job.schedule))
    written = {key: value for key, value in everything.items()
               if key == "schedule" or (value != defaults[key] and value is not None)}
    if written.get("handler") == job.name:
        del written["handler"]
    return written


def dump_toml(source: str | None, jobs: Mapping[str, Mapping[str, Any]]) -> str:
    """A jobs file declaring ``jobs`` (name -> fields), which ``read_jobs_file`` reads back
    to the same fields. A payload is written as JSON text (TOML has no null)."""
    lines = ["# Jobs declared as code: apply with `cronjobs apply FILE` (see the docs,",
             "# \"Keep jobs as code\"). Written by `cronjobs export`."]
    if source is not None:
        lines += ["", f"source = {_string(source)}"]
    for name, fields in jobs.items():
        lines += ["", f"[jobs.{_key(name)}]"]
        for field, value in fields.items():
            written = (json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
                       if field == "payload" else value)
            lines.append(f"{field} = {_value(written)}")
    return "\n".join(lines) + "\n"


def _value(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return _string(str(value))


def _key(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else _string(name)


_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"',
            "\\": "\\\\"}


def _string(text: str) -> str:
    """A TOML string: a literal one ('...') when it needs no escape, else a basic one."""
    if "'" not in text and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        return f"'{text}'"
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'
