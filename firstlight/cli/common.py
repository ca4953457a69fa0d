"""What the commands share: exit codes, usage errors that exit 64, and the click.Command class for commands
outside the core ``up``/``watch`` flow.
"""

from __future__ import annotations

import click

from firstlight.vocab import EXIT_CODES, EXIT_REGRESSION, EXIT_USAGE

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


__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_REGRESSION", "EXIT_TIMEOUT", "EXIT_USAGE", "Command",
           "UsageFailure"]
