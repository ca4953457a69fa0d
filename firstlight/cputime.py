"""CPU time as the kernel counts it: whole clock ticks (``/proc/PID/stat``'s utime and stime, ``USER_HZ``).

A figure summed from ticks in floating point can fall a rounding error short of a threshold it reaches in ticks
(user 0.09 s + system 0.01 s is 0.09999999999999999 s, under 0.1). Every comparison of CPU seconds
with a threshold goes through ``reaches``, so the answer is the kernel's, not the float's.
"""

from __future__ import annotations

import math
import os

CLK_TCK: int = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100  # not Linux: the usual USER_HZ
TICK_S = 1.0 / CLK_TCK  # the resolution of every CPU figure read from /proc

_ROUNDING = 1e-6  # of a tick: far under the resolution, far over a float's error on seconds


def reaches(used_s: float, threshold_s: float) -> bool:
    """``used_s >= threshold_s`` to the resolution CPU time is counted in: ``used_s`` is taken as the whole
    number of ticks it stands for (float noise removed, never rounded up to the next tick), and reaches the
    threshold when those ticks do."""
    return math.floor(used_s * CLK_TCK + _ROUNDING) >= threshold_s * CLK_TCK - _ROUNDING


def rate_reaches(used_s: float, seconds: float, cores: float) -> bool:
    """CPU ``used_s`` over ``seconds`` of wall time is at least ``cores`` (``seconds`` > 0)."""
    return reaches(used_s, cores * seconds)
