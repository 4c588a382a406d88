#!/usr/bin/env python3
"""Splits an ncu CSV of a model_step_bench run (scripts/gpu/step-kernels.sh: gpu__time_duration.sum
of every kernel, --csv --print-units base) into forward steps and prints the decode steps' kernels.

A step starts at each embedding kernel (EmbeddingGatherKernel; a DF11 model's embedding-rows decode
comes just before it and is counted with the step before, see below). Decode steps are the steps
with no prefill-mode attention (AttentionKernel<.., 4> or the Hopper WgmmaPrefillKernel); with
--prefill, the steps that have it are taken instead. The last one complete in the CSV is
printed kernel by kernel: (name, grid) -> launches, summed microseconds; then the total of every
decode step seen (median). Times are ncu's, kernels serialized: no overlap between kernels, so a
step's sum is not its wall time in a CUDA graph.
Usage: step_kernels.py NCU.csv [--label TEXT] [--prefill]
"""
import argparse
import csv
import re
import statistics
import sys


def short(name):
    name = re.sub(r"df11::|cuda::|\(anonymous namespace\)::|<unnamed>::|fixed_lanes::", "", name)
    name = re.sub(r"\(.*", "", name)  # parameters
    name = re.sub(r"^void ", "", name)
    return name.strip()


def rows(path):
    with open(path, newline="", errors="replace") as f:
        lines = [line for line in f if line.startswith('"')]
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        return []
    col = {h: i for i, h in enumerate(header)}
    out = []
    for r in reader:
        if len(r) != len(header) or r[col["Metric Name"]] != "gpu__time_duration.sum":
            continue
        value = float(r[col["Metric Value"]].replace(",", ""))
        unit = r[col["Metric Unit"]]
        us = value / 1000.0 if unit in ("nsecond", "ns") else value * 1e6 if unit in ("second", "s") else value
        out.append((int(r[col["ID"]]), short(r[col["Kernel Name"]]), r[col["Grid Size"]], us))
    out.sort()
    return out


def is_prefill(step):
    return any(re.search(r"AttentionKernel<\d+, 4>|WgmmaPrefillKernel", k[1]) for k in step)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv")
    parser.add_argument("--label", default="")
    parser.add_argument("--prefill", action="store_true", help="sum the prefill steps instead of the decode steps")
    args = parser.parse_args()
    kernels = rows(args.csv)
    if not kernels:
        print(f"{args.label}: no kernels in {args.csv}")
        return 1
    steps, current = [], None
    for k in kernels:
        if "EmbeddingGather" in k[1]:
            current = []
            steps.append(current)
        if current is not None:
            current.append(k)
    kind = "prefill" if args.prefill else "decode"
    chosen = [s for s in steps if is_prefill(s) == args.prefill]
    complete = chosen[:-1] if chosen and chosen[-1] is steps[-1] else chosen  # the last may be cut off
    if not complete:
        print(f"{args.label}: {len(kernels)} kernels, {len(steps)} steps, no complete {kind} step")
        return 1
    totals = [sum(k[3] for k in s) for s in complete]
    last = complete[-1]
    print(f"== {args.label}: {len(kernels)} kernels, {len(steps)} steps, {len(complete)} complete {kind} steps; "
          f"kernel sum per {kind} step median {statistics.median(totals):.1f} us (min {min(totals):.1f}); "
          f"the last, {len(last)} launches:")
    groups = {}
    for _, name, grid, us in last:
        g = groups.setdefault((name, grid), [0, 0.0])
        g[0] += 1
        g[1] += us
    for (name, grid), (n, us) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(f"  {us:9.1f} us {n:4d} x {us / n:7.2f}  {grid:>14}  {name[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
