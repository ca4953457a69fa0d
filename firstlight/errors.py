"""The root of every exception firstlight defines, so that a caller catches firstlight's own errors in one clause.

Each error is defined next to the code that raises it (its module is named below) and derives from
:class:`FirstlightError`; an error that is also a kind of built-in one keeps that base too, so the callers that
catch ``ValueError`` or ``OSError`` still do. The tree (tests/unit/test_errors.py keeps it true)::

    FirstlightError
    ├── NotReady                 the server did not become READY (firstlight.api)
    ├── SettingError             a setting the run cannot use; also a ValueError (firstlight.settings)
    ├── UsageFailure             a command line the CLI refuses; also click.UsageError (firstlight.cli.options)
    ├── LaunchError              the server's command could not be started (firstlight.runner.launcher)
    ├── RuntimeFailure           a container runtime could not answer (firstlight.containers.runtime)
    │   └── ContainerGone        the runtime has no such container: removed, or never made
    ├── SystemctlError           systemctl could not answer (firstlight.units.systemctl)
    ├── JournalError             journalctl missing, or the journal unreadable (firstlight.units.journal)
    ├── HistoryError             the history cannot be used (firstlight.history.errors)
    │   ├── Unreachable          its shared database did not answer in time or refused the login
    │   (_Corrupt                private: a file that is not a database, recreated or named; firstlight.history.db)
    ├── RecordError              a record that cannot be read (firstlight.report.record)
    ├── GgufError                a GGUF header that cannot be read; also a ValueError (firstlight.preflight.gguf)
    ├── NvmlUnavailable          no NVML library, driver or GPU here (firstlight.samplers.nvml)
    ├── NotRegularFile           a path that is not a regular file; also an OSError (firstlight.files)
    ├── WireError                no usable HTTP answer (firstlight.wire.errors)
    ├── NotJSON                  a body that is not JSON; also a ValueError (firstlight.wire.content)
    ├── LineTooLong              an event-stream line over its cap; also a ValueError (firstlight.wire.content)
    └── BenchError               the benchmark cannot run (firstlight.bench.client)
        (_BadAnswer              private: one request's answer unusable, counted as an error)

What is not here is not firstlight's own: an ``OSError`` of the machine, a ``click`` error of the command line's
parser, a plain ``ValueError`` or ``TypeError`` for an argument no caller should pass (as the standard library
raises them), and a bug, which the guard of every thread (:class:`firstlight.samplers.base.Guard`) reports.
"""

from __future__ import annotations


class FirstlightError(Exception):
    """Something firstlight raises on purpose, with one line for a person as its ``str()``."""
