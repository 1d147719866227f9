"""How to tick: one frozen object, built once from the command line (``cronjobs tick``, or
``cronjobs worker`` for the ticks it starts) and handed down as it is, to the tick and its
executor. The worker hands it to its ticks as JSON (:meth:`TickOptions.to_json`)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TickOptions:
    """The options of a tick (the `cronjobs tick` options)."""

    now: dt.datetime | None = None  # tick as if the database's clock said this
    allow_future: bool = False  # a `now` ahead of the database's clock ticks for real
    dry_run: bool = False
    worker: str = "cronjobs"  # who holds the leases: `host:pid` of the ticking process
    concurrency: int | None = None  # runs at once; None: sized by the tick (sizing.py)
    max_runs: int | None = None
    max_runtime: float = 45.0  # seconds of claiming
    grace: float = 25.0  # seconds running jobs get after SIGTERM when the tick is stopped
    apps: tuple[str, ...] = ()  # the --app modules (only their handlers' runs are claimed)
    alert_command: str | None = None  # global: for jobs without their own
    run_ids: tuple[int, ...] | None = None  # only run these (`trigger --run`); materialise nothing
    handlers_only: bool = False  # refuse shell-command jobs
    allowed_commands: tuple[str, ...] = ()  # if set, only commands matching a glob run
    in_process: bool = False  # run handlers in threads of the tick (runners/inprocess.py)
    dashboard_url: str | None = None  # notifications link to its /runs/ID pages
    notify_deadline: dt.timedelta = dt.timedelta(hours=24)  # a notification is tried so long

    def to_json(self) -> str:
        """The options as one JSON document (what :meth:`from_json` reads back)."""
        data: dict[str, Any] = dataclasses.asdict(self)
        data["now"] = None if self.now is None else self.now.isoformat()
        data["notify_deadline"] = self.notify_deadline.total_seconds()
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> TickOptions:
        data = json.loads(text)
        names = {f.name for f in dataclasses.fields(cls)}
        if not isinstance(data, dict) or not set(data) <= names:
            raise ValueError(f"not tick options: {text[:200]!r}")
        data = {key: tuple(value) if isinstance(value, list) else value
                for key, value in data.items()}
        if data.get("now") is not None:
            data["now"] = dt.datetime.fromisoformat(data["now"])
        if data.get("notify_deadline") is not None:
            data["notify_deadline"] = dt.timedelta(seconds=data["notify_deadline"])
        return cls(**data)
