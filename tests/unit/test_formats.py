"""How sizes, durations and rates are said (firstlight.formats), the one place for them."""

from __future__ import annotations

import pytest

from firstlight.formats import GIB, duration, gib, mbps, seconds, size


@pytest.mark.parametrize("n, text", [(None, "?"), (0, "0 B"), (999, "999 B"), (1000, "1.0 kB"), (98.4e6, "98.4 MB"),
                                     (1.5e9, "1.5 GB"), (-2e6, "-2.0 MB"), (1e6, "1.0 MB"),
                                     (1e9, "1.0 GB")])
def test_size_in_decimal_units(n: float | None, text: str):
    assert size(n) == text


@pytest.mark.parametrize("s, text", [(None, "?"), (-1, "0.0s"), (4.25, "4.2s"), (9.96, "10.0s"), (42, "42s"),
                                     (10.0, "10s"), (60, "1m00s"), (3599, "59m59s"), (3600, "1h00m"), (725, "12m05s"),
                                     (3720, "1h02m")])
def test_duration_compact(s: float | None, text: str):
    assert duration(s) == text


@pytest.mark.parametrize("s, text", [(None, "?"), (0.35, "350 ms"), (0.999, "999 ms"), (1.0, "1.0 s"),
                                     (4.2, "4.2 s"), (60, "1 min 00 s"), (725, "12 min 05 s"), (-725, "-12 min 05 s")])
def test_seconds_spelt_out_and_signed(s: float | None, text: str):
    assert seconds(s) == text


@pytest.mark.parametrize("rate, text", [(None, "?"), (0.3e6, "0.3 MB/s"), (9.9e6, "9.9 MB/s"), (9.95e6, "10 MB/s"),
                                        (127e6, "127 MB/s"), (5_050_003, "5.1 MB/s"), (10_500_010, "11 MB/s")])
def test_a_slow_rate_keeps_its_decimal(rate: float | None, text: str):
    assert mbps(rate) == text


def test_gpu_memory_in_binary_gigabytes():
    assert gib(80 * GIB) == "80.0 GiB" and gib(GIB // 2) == "0.5 GiB"


def test_the_judges_evidence_says_a_move_in_mb_and_a_size_in_gb_or_whole_mb() -> None:
    from firstlight.formats import gb, mb

    assert (mb(2_949_000), mb(0), mb(12_345_678_901)) == ("2.9 MB", "0.0 MB", "12345.7 MB")
    assert (gb(1e9), gb(1_234_567_890), gb(999_999_999), gb(98_400_000)) == ("1.00 GB", "1.23 GB", "1000 MB", "98 MB")
