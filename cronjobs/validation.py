"""Checks of user input shared by the CLI and the library, each with a clear message."""

from __future__ import annotations

import json
import re
from typing import Any

from cronjobs.errors import UsageError

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")  # mirrors the schema's CHECK
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_COMMAND_CHARS = 8192
MAX_NOTE_CHARS = 1000


def check_name(name: str, *, what: str = "job name") -> str:
    if not NAME_PATTERN.fullmatch(name):
        shown = name if len(name) <= 60 else name[:57] + "..."
        raise UsageError(
            f"invalid {what} {shown!r}: use 1 to 128 letters, digits, '_', '.', ':' or '-', "
            "starting with a letter or digit"
        )
    return name


def parse_payload(text: str) -> dict[str, Any]:
    """A JSON object, at most 64 KiB."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_PAYLOAD_BYTES:
        raise UsageError(f"invalid --payload: larger than {MAX_PAYLOAD_BYTES // 1024} KiB")
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"invalid --payload: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        kind = type(value).__name__ if value is not None else "null"
        kind = {"list": "an array", "str": "a string", "int": "a number", "float": "a number",
                "bool": "a boolean"}.get(kind, kind)
        raise UsageError(f"invalid --payload: expected a JSON object such as '{{\"days\": 7}}', "
                         f"got {kind}")
    check_text(json.dumps(value), what="--payload")
    return value


def check_text(value: str, *, what: str, limit: int | None = None) -> str:
    """Text PostgreSQL can store (no NUL characters), within ``limit`` characters."""
    if "\x00" in value or "\\u0000" in value:
        raise UsageError(f"invalid {what}: contains a NUL character")
    if limit is not None and len(value) > limit:
        raise UsageError(f"invalid {what}: longer than {limit} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UsageError(f"invalid {what}: not valid text (lone surrogate)") from None
    return value
