"""The ``firstlight`` command line, one package: the group and the start commands (``app``: up, watch, probe,
replay, demo), the commands beside them (bench, history, preflight, report, explain), ``--unit`` (``unit``),
and what they share: ``options`` (exit codes, the one usage error, checked option types, the option groups and
the Config parts built from them) and ``run`` (the reporters and artifacts of a watch). ``app`` imports ``unit``
to register it; neither ``unit`` nor ``options`` nor ``run`` imports ``app``.

Commands parse options into a Config, pick the engine profile and reporters, run a Session, and map the verdict
to an exit code. Nothing here judges or samples.
"""

from firstlight.cli.app import EXIT_HELP, cli, main

__all__ = ["EXIT_HELP", "cli", "main"]
