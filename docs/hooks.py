"""MkDocs hook: put the generated command-line reference where a page asks for it.

A page says ``<!-- generated: cli -->``, ``<!-- generated: environment -->`` or
``<!-- generated: exit-codes -->`` on a line of its own; the build replaces the marker with
what ``cronjobs.cli.reference`` generates from the click commands, so the reference cannot
drift from the code. An unknown marker fails the build.
"""

from __future__ import annotations

import re
from typing import Any

from cronjobs.cli import reference

GENERATORS = {
    "cli": reference.cli_markdown,
    "environment": reference.environment_markdown,
    "exit-codes": reference.exit_codes_markdown,
}
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    def generate(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"{page.file.src_path}: unknown generated section {name!r}")
        return GENERATORS[name]()

    return MARKER.sub(generate, markdown)
