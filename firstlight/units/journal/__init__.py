"""The unit's journal: entries as ``journalctl -o json`` writes them, one invocation's lines, followed live.

We run ``journalctl`` rather than bind libsystemd: it is on every systemd machine, it reads a journal file
copied from another machine (``--file``) and it follows one (``-f``) with no daemon; systemd-python would need
a C build for the same API. JSON as journalctl writes it (journalctl(1), "json"):

* a field over 4096 bytes is ``null`` (unless ``--all``: we pass it, but a saved dump may have nulls);
* a field repeated in one entry is an array of its values;
* a value that is not valid UTF-8 (or not printable) is an array of byte numbers.

``MESSAGE`` may be any of those. An entry's time is its ``__REALTIME_TIMESTAMP`` (microseconds since the
epoch, when journald received it). ``journalctl -u UNIT`` also returns systemd's own messages about the unit
(``UNIT=``, with its ``INVOCATION_ID=``): those are not the engine's lines, but a main-process exit among them
is evidence of how an attempt ended. ``_SYSTEMD_INVOCATION_ID`` tells one start of the unit from the next, so
an earlier attempt's lines never count for this one.

The package, one module per concern: ``entries`` (an entry and its JSON quirks, systemd's own messages),
``journalctl`` (running it, bounded), ``invocations`` (a unit's starts, for replay) and ``follow`` (the live
journal, and the source that feeds one attempt to a watch). The names below are its API.
"""
