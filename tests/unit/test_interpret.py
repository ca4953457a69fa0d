"""The line interpreter (firstlight/interpret.py): a traceback frame may move the phase forward to where the
crash happened, never back (a torch.compile frame under the KV-cache sizing is not a return to compile)."""

from __future__ import annotations

from firstlight.engines import get_profile
from firstlight.interpret import LineInterpreter

SGLANG = get_profile("sglang")
WRAPPER = "[2025-01-01 00:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):"
KV_LINE = "[2025-01-01 00:00:04 TP0] KV Cache is allocated. #tokens: 100000, K size: 1.0 GB, V size: 1.0 GB"
COMPILE_FRAME = '  File "/usr/lib/python3/site-packages/torch/_dynamo/eval_frame.py", line 655, in _fn'
GRAPH_FRAME = '  File "/sgl/model_runner.py", line 20, in init_cuda_graphs'


def test_a_traceback_frame_never_moves_the_phase_back_from_kv_cache_to_compile():
    it = LineInterpreter(SGLANG)
    assert it.feed(KV_LINE).phase == "kv_cache"
    it.feed(WRAPPER)  # the root traceback: its frames may still move the phase, forward only
    r = it.feed(COMPILE_FRAME)
    assert r.phase is None and it.phase == "kv_cache"
    assert it.feed(GRAPH_FRAME).phase == "cuda_graph"  # forward: where the crash happened
    assert it.feed(COMPILE_FRAME).phase is None and it.phase == "cuda_graph"


def test_a_frame_before_any_fatal_line_never_moves_the_phase_back():
    it = LineInterpreter(SGLANG)
    it.feed(KV_LINE)
    it.feed("Traceback (most recent call last):")
    assert it.feed(COMPILE_FRAME).phase is None and it.phase == "kv_cache"
