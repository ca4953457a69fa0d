"""Click commands outside the core ``up``/``watch`` flow, as plain ``click.Command`` objects.

Register them with::

    from firstlight.commands import bench_command, history_command
    cli.add_command(bench_command); cli.add_command(history_command)
"""

from __future__ import annotations

from typing import Any

import click

from firstlight.runner.session import EXIT_CODES, EXIT_REGRESSION, EXIT_USAGE

EXIT_OK = 0
EXIT_FAILED = EXIT_CODES["failed"]
EXIT_TIMEOUT = EXIT_CODES["timeout"]
EXIT_INTERRUPTED = EXIT_CODES["interrupted"]


class UsageFailure(click.UsageError):
    exit_code = EXIT_USAGE


class Command(click.Command):
    """A click command whose usage errors exit 64 (EX_USAGE) even when run on its own (click's default is 2,
    which means 'hung' in this project)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as e:
            if e.exit_code == EXIT_USAGE:
                raise
            raise UsageFailure(e.format_message(), e.ctx) from None


def __getattr__(name: str) -> Any:  # lazy: importing the package must not import both commands
    if name == "bench_command":
        from firstlight.commands.bench import bench_command

        return bench_command
    if name == "history_command":
        from firstlight.commands.history import history_command

        return history_command
    if name == "preflight_command":
        from firstlight.commands.preflight import preflight_command

        return preflight_command
    raise AttributeError(name)


__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_REGRESSION", "EXIT_TIMEOUT", "EXIT_USAGE", "Command",
           "UsageFailure", "bench_command", "history_command", "preflight_command"]
