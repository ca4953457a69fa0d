"""vLLM's own startup figures, read through the one log interpretation (the profile's ``engine_clock`` data) and
set beside the anatomy, against the real startup logs (the 0.32 CPU runs of tests/e2e/vllm/test_server.py and the
logs in shared/logs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from firstlight.engines.vllm import VLLM
from firstlight.interpret import LineInterpreter
from firstlight.logreplay import replay_log
from tests.support.common import FIXTURES, SHARED, require

ENGINES = FIXTURES / "engines"


def _rows(path: Path) -> list[tuple[str, float, float | None, bool]]:
    r = replay_log(path, "vllm")
    assert r.engine_clock is not None
    return [(x["stage"], x["engine_s"], x["firstlight_s"], x["differs"]) for x in r.engine_clock["phases"]]


@pytest.mark.parametrize(("line", "stage", "seconds", "phases"), [
    ("(Worker pid=14370) INFO 11-30 14:02:17 [default_loader.py:501] Loading weights took 0.56 seconds",
     "loading_weights", 0.56, ("weights_loading",)),
    ("(EngineCore_0 pid=4301) INFO 07-21 09:00:21 [gpu_model_runner.py:1801] Model loading took 15.2683 GiB and "
     "4.131 seconds", "model_loading", 4.131, ("weights_loading",)),
    ("INFO 05-07 02:13:52 [gpu_model_runner.py:1347] Model loading took 0.2533 GiB memory and 0.907387 seconds",
     "model_loading", 0.907387, ("weights_loading",)),
    ("(EngineCore_0 pid=4301) INFO 07-21 09:00:33 [monitor.py:34] torch.compile takes 10.19 s in total",
     "torch_compile", 10.19, ("compile",)),
    ("INFO 12-01 10:00:00 [monitor.py:20] torch.compile took 7.50 s in total", "torch_compile", 7.5, ("compile",)),
    ("(Worker pid=14370) INFO 11-30 14:08:26 [monitor.py:91] [backbone] Initial profiling/warmup run took 79.21 s",
     "profiling_warmup_run", 79.21, ("compile",)),
    ("INFO 04-21 22:56:58 [gpu_model_runner.py:1608] Graph capturing finished in 11412 secs, took 1.31 GiB",
     "graph_capturing", 11412.0, ("cuda_graph",)),
    ("(EngineCore pid=11200) INFO 11-30 14:08:33 [core.py:402] init engine (profile, create kv cache, warmup "
     "model) took 373.15 s (compilation: 12.00 s)", "init_engine", 373.15,
     ("weights_loaded", "compile", "kv_cache", "cuda_graph")),
    ("(APIServer pid=16247) INFO 07-23 03:32:34 [launcher.py:166] vLLM API server is ready. Startup took 215.840 "
     "seconds", "startup", 215.84, ("*",)),
])
def test_each_startup_figure_vllm_prints_is_read_by_the_one_interpreter(line: str, stage: str, seconds: float,
                                                                         phases: tuple[str, ...]):
    r = LineInterpreter(VLLM).feed(line, 1.0)
    assert r.engine_clock is not None
    marker, got = r.engine_clock
    assert (marker.stage, got, marker.phases) == (stage, seconds, phases)


def test_a_line_that_only_looks_like_one_is_not_a_figure():
    for line in ("Loading weights took a while", "Model loading took 2 GiB",
                 "torch.compile takes forever", "Graph capturing finished"):
        assert LineInterpreter(VLLM).feed(line, 1.0).engine_clock is None
    assert LineInterpreter(VLLM).feed("Loading weights took 1.0 seconds", 1.0, final=False).engine_clock is None


def test_vllm_032_cold_cpu_start_its_warmup_figure_leaves_out_the_compile():
    # the warm-up run's clock starts after torch.compile (monitor.py times it alone): 79.2 s of firstlight's 372 s
    assert _rows(ENGINES / "vllm-0.32-ready-cold.log") == [
        ("loading_weights", 0.56, 2.0, False),
        ("profiling_warmup_run", 79.21, 372.0, True),
        ("init_engine", 373.15, 380.0, False),
    ]
    r = replay_log(ENGINES / "vllm-0.32-ready-cold.log", "vllm")
    note = r.engine_clock["phases"][1]["note"]  # type: ignore[index]
    assert note == ("the engine counts 79.2s, firstlight saw 372.0s of compile: the engine's clock starts 286.8s "
                    "after firstlight's compile began")


def test_vllm_032_warm_cpu_start():
    assert _rows(ENGINES / "vllm-0.32-ready-warm.log") == [
        ("loading_weights", 1.46, 3.0, False),
        ("profiling_warmup_run", 184.91, 521.0, True),
        ("init_engine", 523.08, 539.0, False),
    ]


def test_vllm_v1_gpu_start():
    assert _rows(ENGINES / "vllm-v1-ready.log") == [
        ("loading_weights", 3.62, 4.0, False),
        ("model_loading", 4.131, 4.0, False),
        ("torch_compile", 10.19, 7.0, True),  # its clock runs from before the first compile line firstlight sees
        ("graph_capturing", 4.0, 5.0, False),  # entered at the capture bar's first redraw (line 21)
        ("init_engine", 16.55, 18.0, False),
    ]
    note = replay_log(ENGINES / "vllm-v1-ready.log", "vllm").engine_clock["phases"][2]["note"]  # type: ignore[index]
    assert "the engine's clock starts 4.2s before firstlight's compile began" in note


def test_the_shared_logs_figures():
    require((SHARED / "logs").is_dir(), "the shared startup logs are not here")
    rows = _rows(SHARED / "logs" / "vllm-enginecore-failed-after-torch-compile.log")
    assert ("torch_compile", 17.0, 22.0, True) in rows
    three_h = _rows(SHARED / "logs" / "vllm-slow-startup-lora-graph-capture-3h.log")
    assert three_h == [("graph_capturing", 11412.0, 84.0, True)]  # the excerpt holds 84 s of its 3 h capture
