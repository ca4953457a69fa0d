"""Runs drawn from the history: ``up --report/--trace`` write both whatever the verdict and keep the timeline
with the run; ``report --last``/``--run`` draw it again; databases from before timelines were kept still work.

The in-process tests of this subject; the others: ``tests/e2e/report/test_history.py``.
"""

from __future__ import annotations

from pathlib import Path


def test_the_private_copy_failing_never_stops_the_users_record(tmp_path: Path):
    import io

    from firstlight.report.record import RecordTee

    class Full(io.StringIO):
        def write(self, s: str) -> int:
            raise OSError(28, "No space left on device")

    user = io.StringIO()
    tee = RecordTee(user, Full())
    tee.write("a\n")
    tee.write("b\n")
    assert user.getvalue() == "a\nb\n" and tee.private is None
    alone = RecordTee(None, Full())
    assert alone.write("c\n") == 2  # no --record: nothing to tell the user, the watch goes on
