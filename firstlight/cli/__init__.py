"""The ``firstlight`` command line, one package: the group and the start commands (``app``: up, watch, probe,
replay, demo), the commands beside them (bench, history, preflight, report), ``--unit`` (``unit``), and what
they share (``common``: exit codes, usage errors; ``params``: checked option types).

Commands parse options into a Config, pick the engine profile and reporters, run a Session, and map the verdict
to an exit code. Nothing here judges or samples.
"""

from firstlight.cli.app import EXIT_HELP, cli, main

__all__ = ["EXIT_HELP", "cli", "main"]
