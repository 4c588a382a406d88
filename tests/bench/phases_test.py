#!/usr/bin/env python3
"""bench/power_phases.py and bench/clock_phases.py on hand-made logs and nvidia-smi CSVs.

Usage: phases_test.py BENCH_DIR. Exits 1 naming the first expectation that fails.

power_phases: samples every 0.1 s from epoch 1000.0; an idle phase at 100 W (instant; power.draw
says 90 W, which must be ignored) over [1000.05, 1003.05], then a copy phase at 400 W over
[1003.05, 1006.05] of calls of 0.5 ms on 1e9 weights: 2e12 weights/s, so 400 / 2e12 = 200 pJ a
weight and (400 - 100) / 2e12 = 150 above idle. Samples kept: from start + 1 s to end - 0.1 s, so
1004.1 .. 1005.9, 19 of them. A CSV without power.draw.instant falls back to power.draw.

clock_phases: one run over [1000, 1006]: 30 samples at 1980 MHz and 300 W, then 20 at 1500 MHz,
700 W and the power-cap reason (0x4); all busy (above 140 W), one burst: mean clock
(30 * 1980 + 20 * 1500) / 50 = 1788 MHz, least 1500, most 700 W, capped 40%. An unmarked run (a
df11_gemv_bench run, which run-ab.sh does not mark) comes first in the log: the marks belong to the
run they follow, so it gets no line and the marked run keeps its burst.
"""
import datetime
import os
import subprocess
import sys
import tempfile

bench = sys.argv[1]
failures = []


def expect(what, ok):
    if not ok:
        failures.append(what)


def stamp(t):
    """nvidia-smi's local-time timestamp of epoch t (the scripts move the first one onto its epoch)."""
    return datetime.datetime.fromtimestamp(t).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]


def run(args):
    p = subprocess.run([sys.executable] + args, capture_output=True, text=True)
    if p.returncode != 0:
        failures.append(f"{args[0]} exited {p.returncode}: {p.stderr.strip()}")
    return p.stdout


with tempfile.TemporaryDirectory() as d:
    # power_phases, with power.draw.instant.
    log = os.path.join(d, "power.log")
    with open(log, "w") as f:
        f.write("clocks sampled from 1000.0\n"
                "power phase idle gate|up_proj start 1000.050 end 1003.050 calls 0 ms_per_call 0 weights 1000000000\n"
                "power phase copy gate|up_proj start 1003.050 end 1006.050 calls 6000 ms_per_call 0.50000 "
                "weights 1000000000\n")
    for name, instant in (("instant.csv", True), ("draw.csv", False)):
        with open(os.path.join(d, name), "w") as f:
            for i in range(70):
                t = 1000.0 + 0.1 * i
                w = 100.0 if t < 1003.05 else 400.0
                reasons = "0x0000000000000000"
                if instant:
                    f.write(f"{stamp(t)}, 1980 MHz, {w - 10:.2f} W, {w:.2f} W, {reasons}\n")
                else:
                    f.write(f"{stamp(t)}, 1980 MHz, {w:.2f} W, {reasons}\n")
    for name in ("instant.csv", "draw.csv"):
        out = run([os.path.join(bench, "power_phases.py"), log, os.path.join(d, name)])
        copy = [line.split() for line in out.splitlines() if line.startswith("gate|up_proj") and " copy " in line]
        expect(f"{name}: one copy line in\n{out}", len(copy) == 1)
        if copy:
            c = copy[0]  # linear phase samples W MHz capped ms/call Gweights/s pJ/weight above_idle
            expect(f"{name}: 19 samples, got {c[2]}", c[2] == "19")
            expect(f"{name}: 400.0 W, got {c[3]}", c[3] == "400.0")
            expect(f"{name}: 2000 G weights/s, got {c[7]}", c[7] == "2000")
            expect(f"{name}: 200.0 pJ a weight, got {c[8]}", c[8] == "200.0")
            expect(f"{name}: 150.0 pJ above idle, got {c[9]}", c[9] == "150.0")

    # clock_phases, run-ab.sh's CSV (timestamp, SM clock, memory clock, power, temperature, reasons).
    ab = os.path.join(d, "ab.log")
    with open(ab, "w") as f:
        f.write("-- clocks sampled from 1000.0 (nvidia-smi timestamps are local time)\n"
                "===== df11_gemv_bench round 1\nlinears of one decode step (36 layers + lm_head), ms:\n"
                "===== model_step_bench round 1\n-- start at 1000.0\n-- end at 1006.0\n")
    csv = os.path.join(d, "clocks.csv")
    with open(csv, "w") as f:
        for i in range(50):
            t = 1000.0 + 0.1 * i
            mhz, w, why = (1980, 300.0, 0) if i < 30 else (1500, 700.0, 4)
            f.write(f"{stamp(t)}, {mhz} MHz, 3201 MHz, {w:.2f} W, 40, 0x{why:016x}\n")
    out = run([os.path.join(bench, "clock_phases.py"), ab, csv])
    expect(f"clock_phases: the burst's clocks in\n{out}", "1788 / 1500 MHz" in out)
    expect(f"clock_phases: the burst's power and cap share in\n{out}", "700 W, capped  40%" in out)
    expect(f"clock_phases: the burst under the marked run's name in\n{out}",
           "model_step_bench round 1:" in out and "df11_gemv_bench" not in out)

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
