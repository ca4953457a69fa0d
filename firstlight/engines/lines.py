"""What every engine's line loses before its profile reads it: ANSI colours, carriage-return redraws, and the
prefixes that wrappers and loggers put in front of the message (a container runtime's, journald's, a process tag,
timestamps and log levels of the engines firstlight knows), so that a profile's ``^`` anchors to the message."""

from __future__ import annotations

import re

from firstlight.logtext import ANSI_RE as _ANSI_RE
from firstlight.logtext import classify_prefix

# Prefixes removed (repeatedly, up to 4 times) before classification. Each alternative is one layer:
# container/journald wrappers, process tags, timestamps and log levels of the engines we know.
_PREFIX_RE = re.compile(
    r"^(?:"
    r"[\w.-]+-\d+\s+\|\s?"  # docker compose: "vllm-1  | "
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [^\s:\[]+(?:\[\d+\])?: "  # journald/syslog
    r"|\((?:[\w.-]+)(?: [\w]+=[^)]*)?\)\s+"  # vLLM/Ray process tag: "(EngineCore_DP0 pid=17374) "
    r"|(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL|TRACE) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?"
    r" (?:\[[^\]]*\] |[\w.-]+:\d+\] )?"  # vLLM: "INFO 05-07 02:13:52 [core.py:396] "
    r"|\[(?:(?:\d{4}-)?\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d+)?(?: [A-Z]{2,3}\d+)*\] "  # SGLang "[... TP0] "
    r"|\[(?:gpu_id|rank|tp_rank)=\d+\] "  # old SGLang "[gpu_id=0] "
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+"
    r"(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR)\s+"  # TGI / tracing ISO
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[,.]\d+)? - [\w.\-]+ - [A-Z]+ - "  # python logging (LMDeploy)
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[,.]\d+)? (?:TRACE|DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) "
    r"|[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [\w./-]+:\d+\] "  # glog (torch C++ warnings)
    r"|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s+"  # uvicorn "INFO:     "
    r"|\d+\.\d\d\.\d{3}\.\d{3} [IWEDT] "  # llama.cpp --log-timestamps/--log-prefix
    r"|\[\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\] "  # TensorRT-LLM "[11/20/2024-10:11:12] "
    r"|\[TRT-LLM\](?: \[[A-Z]\])? "
    r")"
)


def clean_line(line: str) -> str:
    """ANSI-free, right-trimmed line with timestamp/level/TP/worker prefixes removed.

    Carriage-return redraws are *not* handled here (see ``replay.split_redraws``); a ``\\r`` left in the
    line keeps only the text after the last non-empty one. Only a bounded prefix of a line is kept, so that
    no pattern applied to the result does unbounded work.
    """
    line = classify_prefix(line)
    if "\x1b" in line:
        line = _ANSI_RE.sub("", line)
    line = line.rstrip("\r\n")
    if "\r" in line:
        parts = [p for p in line.split("\r") if p.strip()]
        line = parts[-1] if parts else ""
    for _ in range(4):
        m = _PREFIX_RE.match(line)
        if m is None or m.end() == 0:
            break
        line = line[m.end() :]
    return line.rstrip()


__all__ = ["clean_line"]
