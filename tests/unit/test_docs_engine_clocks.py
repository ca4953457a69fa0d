"""Every number docs/engine-clocks.md states is the code's number: the rule's 2 s and 10 %, the endpoints' read
timeout, the stream reader's timeouts, back-off, line cap and event bound. (The figures of the real starts it quotes
are pinned by tests/unit/engines/test_vllm_clock.py.)"""

from __future__ import annotations

import re

import pytest

from firstlight import anatomy
from firstlight.runner import after_ready
from firstlight.samplers import models_sse
from firstlight.wire import content
from tests.support.common import REPO

DOC = " ".join((REPO / "docs" / "engine-clocks.md").read_text().split())


@pytest.mark.parametrize(("pattern", "value"), [
    (r"more than \*\*([\d.]+) s\*\* apart", anatomy.CLOCK_DIFF_S),
    (r"more than \*\*(\d+) %\*\* of firstlight's apart", anatomy.CLOCK_DIFF_SHARE * 100),
    (r"max\(([\d.]+) s, (?:\d+) % of firstlight\)", anatomy.CLOCK_DIFF_S),
    (r"max\((?:[\d.]+) s, (\d+) % of firstlight\)", anatomy.CLOCK_DIFF_SHARE * 100),
    (r"one request each, \*\*([\d.]+) s\*\* read timeout", after_ready.CLOCK_READ_TIMEOUT_S),
    (r"each connect has a \*\*([\d.]+) s\*\* timeout", models_sse.CONNECT_TIMEOUT_S),
    (r"doubles from \*\*([\d.]+) s\*\*", models_sse.BACKOFF_MIN_S),
    (r"to \*\*([\d.]+) s\*\*, a stream quiet", models_sse.BACKOFF_MAX_S),
    (r"a stream quiet for \*\*([\d.]+) s\*\* is reconnected", models_sse.READ_TIMEOUT_S),
    (r"line over ([\d.]+) MiB is dropped", content.MAX_SSE_LINE / (1 << 20)),
    (r"after \*\*(\d+)\*\* events", models_sse.MAX_EVENTS),
])
def test_the_docs_number_is_the_codes(pattern: str, value: float):
    m = re.search(pattern, DOC)
    assert m is not None, pattern
    assert float(m.group(1)) == pytest.approx(value), (m.group(0), value)


def test_the_vllm_figures_it_quotes_are_the_pinned_rows():
    for text in ("Loading weights took 0.56 seconds` against firstlight's 2.0 s", "79.21 s` against 372.0 s",
                 "373.15 s` against 380.0 s", "10.19 s in total` against 7.0 s", "starts 4.2 s before",
                 "starts 286.8s after"):
        assert text in DOC, text
