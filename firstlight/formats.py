"""Numbers as people read them: sizes, durations, rates. The one place for them (a leaf): the console, the
dashboard, systemd's status line, the HTML report, the anatomy's evidence and the preflight all say a size or a
duration the same way."""

from __future__ import annotations

GIB = 1 << 30


def size(n: float | None) -> str:
    """Decimal units, one decimal: ``98.4 MB``; ``?`` when unknown."""
    if n is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"


def mb(n: float) -> str:
    """An amount moved between two samples, always in MB: ``2.9 MB`` read since the last one."""
    return f"{n / 1e6:.1f} MB"


def gb(n: float) -> str:
    """A memory or checkpoint size in the judge's evidence: ``1.23 GB``, under 1 GB in whole MB."""
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def gib(n: float) -> str:
    """Binary gigabytes, as GPU memory is said: ``79.6 GiB``."""
    return f"{n / GIB:.1f} GiB"


def mbps(rate: float | None) -> str:
    """A read rate as evidence: a slow one keeps its first decimal (0.3 MB/s is not "0 MB/s")."""
    if rate is None:
        return "?"
    return f"{rate / 1e6:.1f} MB/s" if rate < 9.95e6 else f"{rate / 1e6:.0f} MB/s"


def duration(s: float | None) -> str:
    """Compact, for a line: ``4.2s``, ``42s``, ``12m05s``, ``1h02m``; ``?`` when unknown."""
    if s is None:
        return "?"
    s = max(0.0, s)
    if s < 60:
        return f"{s:.0f}s" if s >= 10 else f"{s:.1f}s"
    m, sec = divmod(int(s), 60)
    if m < 60:
        return f"{m}m{sec:02d}s"
    h, m = divmod(m, 60)
    return f"{h}h{m:02d}m"


def seconds(s: float | None) -> str:
    """Spelt out, for a page (signed: a difference may be negative): ``350 ms``, ``4.2 s``, ``12 min 05 s``."""
    if s is None:
        return "?"
    if abs(s) < 1:
        return f"{s * 1000:.0f} ms"
    if abs(s) < 60:
        return f"{s:.1f} s"
    m, sec = divmod(round(abs(s)), 60)
    return f"{'-' if s < 0 else ''}{m} min {sec:02d} s"
