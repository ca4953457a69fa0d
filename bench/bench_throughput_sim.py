"""How faithfully does ``firstlight bench`` measure? Run by hand (not part of the test suite):

    .venv/bin/python bench/bench_throughput_sim.py --rates 50,200,1000 --concurrency 1,8,32 --repeats 5

For each token rate and concurrency it starts the simulated server (which streams each request at exactly
``--token-rate`` tokens/s), runs the benchmark ``--repeats`` times and prints medians and ratios to the truth:
per-request decode rate / token rate (1.0 is perfect) and output throughput / (concurrency x rate), which also
shows where the client or the sim's threads stop keeping up.

Known limit of the fixture, not of the client: the sim's ThreadingHTTPServer keeps socketserver's listen backlog
of 5, so bursts of more than ~5 new connections see 1 s SYN retries (TTFT p99 ~1000 ms) and a few
"connection reset by the server" errors at concurrency >= 16; both vanish with ``request_queue_size = 256``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx

from firstlight.bench import BenchConfig, run_bench
from firstlight.sim.fixtures import free_port


@contextlib.contextmanager
def sim(rate: float) -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "firstlight.sim", "--scenario", "normal", "--port", str(port),
                             "--token-rate", str(rate), "--load-seconds", "0.1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the simulated server did not become healthy within 30 s")
            time.sleep(0.05)
        yield url
    finally:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rates", default="50,200,1000", help="token rates per request (comma-separated)")
    ap.add_argument("--concurrency", default="1,8,32")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--requests-per-stream", type=int, default=4)
    a = ap.parse_args()
    print(f"{'rate':>6} {'conc':>5} | {'decode tok/s':>12} {'ratio':>6} | {'out tok/s':>10} {'ideal':>8} {'ratio':>6} "
          f"| {'TTFT ms':>8} {'ITL ms':>7} | errors")
    for rate in (float(x) for x in a.rates.split(",")):
        with sim(rate) as url:
            for conc in (int(x) for x in a.concurrency.split(",")):
                decode, tput, ttft, itl, errors = [], [], [], [], 0
                for _ in range(a.repeats):
                    r = run_bench(BenchConfig(url, output_len=a.output_len, concurrency=conc,
                                              num_requests=conc * a.requests_per_stream, prompt_len=32))
                    errors += r.errors + r.timeouts
                    if r.decode_rate_median:
                        decode.append(r.decode_rate_median)
                    tput.append(r.output_throughput)
                    ttft.append(r.ttft_ms.median or 0.0)
                    itl.append(r.itl_ms.median or 0.0)
                d, t = statistics.median(decode) if decode else 0.0, statistics.median(tput)
                ideal = conc * rate
                print(f"{rate:>6.0f} {conc:>5} | {d:>12.1f} {d / rate:>6.3f} | {t:>10.1f} {ideal:>8.0f} "
                      f"{t / ideal:>6.3f} | {statistics.median(ttft):>8.1f} {statistics.median(itl):>7.2f} | {errors}")


if __name__ == "__main__":
    main()
