"""The group's table of commands (cronjobs.cli.COMMANDS) names every command the family
modules define, each under its own name. (That `cronjobs tick` imports no other family, in a
fresh interpreter: tests/integration/test_imports.py.)"""

from __future__ import annotations

import importlib

import click

from cronjobs.cli import COMMANDS, main_group


def _reachable(command: click.Command, seen: set[int]) -> None:
    seen.add(id(command))
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _reachable(sub, seen)


def test_every_command_a_family_defines_is_in_the_table() -> None:
    ctx = click.Context(main_group)
    seen: set[int] = set()
    for name in COMMANDS:
        command = main_group.get_command(ctx, name)
        assert command is not None and command.name == name, name
        _reachable(command, seen)
    defined = {}
    for family in sorted({module for module, _ in COMMANDS.values()}):
        module = importlib.import_module(f"cronjobs.cli.{family}")
        for attribute, value in vars(module).items():
            if (isinstance(value, click.Command) and value.callback is not None
                    and value.callback.__module__ == module.__name__):
                defined[id(value)] = f"{family}.{attribute}"
    assert sorted(defined[key] for key in defined.keys() - seen) == []
