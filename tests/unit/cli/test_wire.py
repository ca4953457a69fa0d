"""The wire layer's promises through the real CLI (`probe`, `watch`, `bench` in a subprocess) against fault
servers on real sockets. No timing is asserted: each test checks an outcome the old behaviour could not give
(an exit within a generous subprocess limit, a READY that a stuck probing thread would never see).

The in-process tests of this subject; the others: ``tests/e2e/cli/test_wire.py``.
"""

from __future__ import annotations

import pytest

from firstlight.cli import main


@pytest.mark.parametrize("args", [
    ["probe", "http://127.0.0.1:1", "--connect-timeout", "-1"],
    ["probe", "http://127.0.0.1:1", "--timeout", "nan"],
    ["probe", "http://127.0.0.1:1", "--read-timeout", "inf"],
    ["watch", "http://127.0.0.1:1", "--generation-timeout", "1e12"],
    ["watch", "http://127.0.0.1:1", "--connect-timeout", "0"],
    ["up", "--read-timeout", "nan", "--", "true"],
    ["bench", "http://127.0.0.1:1", "--request-timeout", "nan"],
    ["bench", "http://127.0.0.1:1", "--connect-timeout", "-1"],
    ["bench", "http://127.0.0.1:1", "--duration", "nan"],
    ["bench", "http://127.0.0.1:1", "--margin", "nan"],
])
def test_timeouts_are_finite_positive_and_capped(args: list[str], capsys: pytest.CaptureFixture[str]):
    with pytest.raises(SystemExit) as e:
        main(args)
    err = capsys.readouterr().err
    assert e.value.code == 64, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
