"""What the commands that refresh share: ``--watch``, a screen redrawn in place until
Ctrl-C.

On a terminal, ``--watch`` takes the alternate screen (as ``watch`` and ``top`` do), redraws
the whole screen every ``--interval`` seconds, and on Ctrl-C gives the terminal back with
the last screen printed on it (exit code 0). When stdout is not a terminal (a pipe, a file,
a log collector) nothing is redrawn: each refresh is printed in full after a line
``--- <instant in UTC> ---``, so the file keeps the history; with ``--json``, each refresh is
one JSON document on one line (JSON Lines).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

import click

from cronjobs.durations import format_duration

T = TypeVar("T")

ENTER, LEAVE, HOME_CLEAR = "\x1b[?1049h", "\x1b[?1049l", "\x1b[H\x1b[2J"
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"


def watch_options(func: Callable[..., T]) -> Callable[..., T]:
    func = click.option("--interval", type=click.FloatRange(0.2, 3600), default=2.0,
                        show_default=True, metavar="SECONDS",
                        help="With --watch: seconds between two refreshes.")(func)
    return click.option("-w", "--watch", is_flag=True,
                        help="Redraw every --interval seconds until Ctrl-C (on a terminal; "
                             "piped, each refresh is appended: see the docs' command-line "
                             "reference).")(func)


def watch(frame: Callable[[], tuple[dt.datetime, Any, str]], *, as_json: bool,
          interval: float, sleep: Callable[[float], None] = time.sleep) -> None:
    """Show ``frame()`` — (its instant, JSON data, text) of one refresh — every ``interval``
    seconds until Ctrl-C."""
    out = sys.stdout
    redraw = out.isatty() and not as_json
    last = ""
    if redraw:
        out.write(ENTER + HIDE_CURSOR)
    try:
        while True:
            now, data, text = frame()
            if as_json:
                out.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
            elif redraw:
                stamp = now.astimezone(dt.UTC).strftime("%H:%M:%SZ")
                head = f"every {format_duration(interval)}, Ctrl-C to stop{' ' * 4}{stamp}"
                last = text
                out.write(HOME_CLEAR + head + "\n\n" + text + "\n")
            else:
                stamp = now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                out.write(f"--- {stamp} ---\n{text}\n")
            out.flush()
            sleep(interval)
    except KeyboardInterrupt:
        pass
    finally:
        if redraw:
            out.write(SHOW_CURSOR + LEAVE + (last + "\n" if last else ""))
            out.flush()
