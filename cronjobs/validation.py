"""Checks of user input shared by the CLI and the library, each with a clear message."""

from __future__ import annotations

import json
import math
import re
from typing import Any
from urllib.parse import urlsplit

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


def parse_payload(text: str, *, option: str = "--payload") -> dict[str, Any]:
    """A JSON object, at most 64 KiB, that both Python and PostgreSQL's jsonb hold as
    written: no NaN or Infinity, no number beyond a float's range, no NUL character and no
    lone surrogate in any string."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_PAYLOAD_BYTES:
        raise UsageError(f"invalid {option}: larger than {MAX_PAYLOAD_BYTES // 1024} KiB")
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except _NotFinite as exc:
        raise UsageError(f"invalid {option}: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise UsageError(f"invalid {option}: not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise UsageError(f"invalid {option}: expected a JSON object such as '{{\"days\": 7}}', "
                         f"got {json_kind(value)}")
    return check_payload(value, what=option)


class _NotFinite(Exception):
    pass


def json_kind(value: object) -> str:
    """What a JSON value is, in JSON's words (``an array``, not Python's ``list``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object" if isinstance(value, dict) else "not JSON"


def _no_constant(name: str) -> float:
    raise _NotFinite(f"{name} is not JSON (numbers must be finite)")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise _NotFinite(f"the number {text[:40]} is out of range (at most about 1.8e308)")
    return number


def check_payload(value: dict[str, Any], *, what: str = "payload") -> dict[str, Any]:
    """Check a payload given as a dict (by the CLI or a library caller) the same way."""
    pending: list[Any] = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                if isinstance(key, str):
                    check_text(key, what=what)
                pending.append(inner)
        elif isinstance(item, list | tuple):
            pending.extend(item)
        elif isinstance(item, str):
            check_text(item, what=what)
        elif isinstance(item, float) and not math.isfinite(item):
            raise UsageError(f"invalid {what}: {item} is not JSON (numbers must be finite)")
    return value


def check_text(value: str, *, what: str, limit: int | None = None,
               python_what: str | None = None) -> str:
    """Text PostgreSQL can store (no NUL characters), within ``limit`` characters.
    ``python_what`` names the value for a Python caller, where ``what`` is an option."""

    def bad(why: str) -> UsageError:
        return UsageError(f"invalid {what}: {why}",
                          python=f"invalid {python_what}: {why}" if python_what else None)

    if "\x00" in value:
        raise bad("contains a NUL character")
    if limit is not None and len(value) > limit:
        raise bad(f"longer than {limit} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise bad("not valid text (lone surrogate)") from None
    return value


# -- webhook URLs (secrets: an error never quotes one) -------------------------------------

MAX_URL_CHARS = 2048
MAX_NOTIFY_URLS = 10  # mirrors the schema's CHECK


def check_notify_url(url: str, *, what: str = "--notify") -> str:
    """An absolute http(s) URL with a host, as a webhook receiver needs. The message never
    quotes the URL: it may hold a token."""
    if len(url) > MAX_URL_CHARS:
        raise UsageError(f"invalid {what}: longer than {MAX_URL_CHARS} characters")
    if not url.isprintable() or any(c.isspace() for c in url) or not url.isascii():
        raise UsageError(f"invalid {what}: a URL holds no spaces, control or non-ASCII "
                         "characters (percent-encode them)")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UsageError(f"invalid {what}: not a valid URL (bad host or port)") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        shown = f" (got {scheme!r})" if scheme and len(scheme) <= 20 else ""
        raise UsageError(f"invalid {what}: only http:// and https:// URLs are "
                         f"supported{shown}")
    if not parts.hostname:
        raise UsageError(f"invalid {what}: the URL has no host")
    if parts.path.endswith("/***") and not parts.query:
        raise UsageError(f"invalid {what}: the URL is masked, as cronjobs shows it; give "
                         "the real URL")
    if port == 0:
        raise UsageError(f"invalid {what}: port 0 is not a port")
    return url


def mask_url(url: str) -> str:
    """A webhook URL as it may be shown: scheme, host and port; any user, path, query and
    fragment (where services put their tokens) replaced by ``***``."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "***"
    if ":" in host:
        host = f"[{host}]"
    hidden = "/***" if (parts.path not in ("", "/") or parts.query or parts.fragment
                        or parts.username is not None) else ""
    return f"{parts.scheme.lower()}://{host}{port}{hidden}"
