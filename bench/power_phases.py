#!/usr/bin/env python3
"""Joules per weight of each `df11_gemv_bench --power SECONDS` phase, from nvidia-smi's power samples.

The bench prints one line a phase ("power phase NAME LINEAR start S end S calls N ms_per_call M
weights W", Unix seconds); nvidia-smi samples the GPU every 100 ms into a CSV:

    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,power.draw.instant,clocks_event_reasons.active \
      --format=csv,noheader -lms 100

(power.draw.instant may be absent: then power.draw). Its timestamps are local time; the bench log
must hold a line "clocks sampled from EPOCH" (the epoch of the first sample), as
scripts/gpu/run-ab.sh writes it. Samples in a phase's first second (the power reading's
averaging window) and last 0.1 s are left out. Per phase: samples, mean power, mean SM clock, share
of samples at the software power cap (event reason 0x4), time per call, weights per second, and
picojoules per weight: all of the power, and above the idle phase's.

Usage: bench/power_phases.py BENCH_LOG CLOCKS_CSV
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from clock_phases import POWER_CAP, log_and_samples  # noqa: E402


SKIP_SECONDS = 1.0  # the power reading's averaging window, left out of each phase


def watts(f):
    """The instant power where the CSV has it (5 fields), else power.draw."""
    for field in (f[3], f[2]) if len(f) >= 5 else (f[2],):
        try:
            return float(field.split()[0])
        except (ValueError, IndexError):
            pass
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bench_log")
    parser.add_argument("clocks_csv")
    args = parser.parse_args()
    log, data = log_and_samples(args.bench_log, args.clocks_csv, power_of=watts, min_fields=4)
    phases = re.findall(r"power phase (\S+) (\S+) start ([0-9.]+) end ([0-9.]+) calls (\d+) "
                        r"ms_per_call ([0-9.]+) weights (\d+)", log)
    if not phases:
        sys.exit(f"{args.bench_log}: no 'power phase' lines")
    idle = {}
    rows = []
    for name, linear, start, end, calls, ms, weights in phases:
        start, end, ms, weights = float(start), float(end), float(ms), int(weights)
        inside = [s for s in data if start + SKIP_SECONDS <= s[0] <= end - 0.1 and s[2] is not None]
        if not inside:
            print(f"{linear} {name}: no samples inside the phase")
            continue
        w = sum(s[2] for s in inside) / len(inside)
        mhz = sum(s[1] for s in inside) / len(inside)
        capped = sum(1 for s in inside if s[3] & POWER_CAP) / len(inside)
        if name == "idle":
            idle[linear] = w
        rows.append((linear, name, len(inside), w, mhz, capped, ms, weights))
    print(f"{'linear':<13} {'phase':<12} {'samples':>7} {'W':>7} {'MHz':>6} {'capped':>6} {'ms/call':>9} "
          f"{'G weights/s':>11} {'pJ/weight':>9} {'above idle':>10}")
    for linear, name, n, w, mhz, capped, ms, weights in rows:
        if name == "idle":
            print(f"{linear:<13} {name:<12} {n:>7} {w:>7.1f} {mhz:>6.0f} {capped:>6.0%}")
            continue
        rate = weights / (ms * 1e-3)
        above = w - idle.get(linear, 0.0)
        print(f"{linear:<13} {name:<12} {n:>7} {w:>7.1f} {mhz:>6.0f} {capped:>6.0%} {ms:>9.4f} {rate / 1e9:>11.0f} "
              f"{w / rate * 1e12:>9.1f} {above / rate * 1e12:>10.1f}")


if __name__ == "__main__":
    main()
