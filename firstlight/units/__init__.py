"""A systemd unit as the thing watched: its journal (``journal``), its processes (``cgroup``), its own state and
restarts (``systemctl``), and the attempts of one watch (``watch``).

In the field the server is a unit: the operator restarts it with ``systemctl``, reads ``journalctl``, finds
the TP workers with ``ps``. These modules read the same sources: each only observes and puts observations
(``LogLine``, ``ProcessSample``, ``SourceNote``) on the session's sink.
"""

from __future__ import annotations


def unit_name(name: str) -> str:
    """``sglang`` -> ``sglang.service``, as systemctl and journalctl -u complete a bare name."""
    name = name.strip()
    if not name:
        raise ValueError("empty unit name")
    if "/" in name or any(c.isspace() or not c.isprintable() for c in name):
        raise ValueError(f"not a unit name: {name!r}")
    if name.startswith("-"):  # systemctl and journalctl would read it as an option (-H: ssh to a host)
        raise ValueError(f"not a unit name: {name!r} (a unit name never starts with '-')")
    known = (".service", ".scope", ".socket", ".target", ".mount", ".timer", ".slice", ".path", ".swap",
             ".device", ".automount")
    return name if name.endswith(known) else f"{name}.service"
