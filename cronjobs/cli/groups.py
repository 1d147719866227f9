"""The commands about groups of jobs: set (a fleet-wide limit), remove, list, show. Each
parses its input, calls one library function and renders the result."""

from __future__ import annotations

import click

from cronjobs.cli.app import App, emit, json_option, pass_app
from cronjobs.cli.options import SubGroup
from cronjobs.cli.render.common import table
from cronjobs.cli.render.groups import group_json, group_wait_text
from cronjobs.core.groups import list_groups, remove_limit, set_limit, show


@click.group(cls=SubGroup)
def group() -> None:
    """Limit how many runs of a group's jobs run at once, across every tick.

    A job joins a group with `define --group NAME` (or `group = "NAME"` in a jobs file);
    `group set NAME --max-running N` then keeps at most N of the group's runs running at
    once. Runs over the limit wait, queued and not failed, and are claimed when a slot frees.

    \b
    Examples:
      cronjobs group set reports --max-running 2
      cronjobs group list
    """


@group.command(name="set")
@click.argument("name")
@click.option("--max-running", type=click.IntRange(1, 10000), required=True, metavar="N",
              help="At most N runs of the group's jobs at once (1-10000).")
@json_option
@pass_app
def group_set(app: App, name: str, max_running: int, as_json: bool) -> None:
    """Set group NAME's limit: at most N runs of its jobs run at once, on all ticks.

    Runs already running are not stopped; the limit applies from the next claim.

    \b
    Examples:
      cronjobs group set reports --max-running 2
      cronjobs group set heavy --max-running 1 --json
    """
    usage = set_limit(app.store(), name, max_running=max_running)
    app.confirm(group_json(usage), f"group {name}: at most {max_running} running at once "
                f"({usage.jobs} job(s), {usage.running} running now)", as_json)


@group.command(name="remove")
@click.argument("name")
@json_option
@pass_app
def group_remove(app: App, name: str, as_json: bool) -> None:
    """Remove group NAME's limit; its jobs stay in the group, unlimited.

    \b
    Examples:
      cronjobs group remove reports
    """
    usage = remove_limit(app.store(), name)
    app.confirm(group_json(usage), f"group {name}: no limit", as_json)


@group.command(name="list")
@json_option
@pass_app
def group_list(app: App, as_json: bool) -> None:
    """Every group: its limit, its jobs, its running and waiting runs.

    \b
    Examples:
      cronjobs group list
      cronjobs group list --json
    """
    groups = list_groups(app.store())
    text = table(["GROUP", "MAX RUNNING", "JOBS", "RUNNING", "WAITING"],
                 [(g.name, g.max_running or "no limit", g.jobs, g.running,
                   f"{g.waiting} (for a free slot)" if g.full and g.waiting else g.waiting)
                  for g in groups]) if groups else "no groups"
    emit([group_json(g) for g in groups], text, as_json)


@group.command(name="show")
@click.argument("name")
@json_option
@pass_app
def group_show(app: App, name: str, as_json: bool) -> None:
    """Group NAME: its limit, its jobs, and whether its due runs wait for a free slot.

    \b
    Examples:
      cronjobs group show reports
    """
    detail = show(app.store(), name)
    g = detail.usage
    lines = [f"group     {g.name}",
             f"limit     {g.max_running if g.max_running is not None else 'none'}",
             f"running   {g.running}",
             f"waiting   {g.waiting} due run(s)",
             f"jobs      {', '.join(detail.job_names) or '-'}"]
    if g.full and g.waiting:
        lines.append(group_wait_text(g))
    emit({**group_json(g), "job_names": list(detail.job_names)}, "\n".join(lines), as_json)
