#!/usr/bin/env python3
"""The GPU's SM clock and power over each run of a scripts/gpu/run-ab.sh visit made with CLOCKS=1.

run-ab.sh then writes clocks.csv (nvidia-smi every 100 ms: timestamp in local time, SM clock, memory
clock, power, temperature, clocks_event_reasons) and marks each run's start and end (epoch seconds)
in ab.log, after a line giving the epoch of the first sample. A run's busy bursts (samples drawing
more than --idle-watts or below the top clock, gaps of more than a second between bursts: in a
model_step_bench run, the BF16 benchmark, then the DF11 one after its load) are printed with their
mean SM clock, least clock, most power and the share of samples with the software power cap (event
reason 0x4) active.

Usage: bench/clock_phases.py AB_LOG CLOCKS_CSV [--idle-watts 140]
"""
import argparse
import datetime
import re
import sys

POWER_CAP = 0x4  # clocks_event_reasons: SW power cap


def samples(path, first_epoch, power_of=lambda f: float(f[3].split()[0]), min_fields=6):
    """(epoch seconds, SM MHz, watts, event reasons) of every sample of a CSV whose fields are the
    timestamp, the SM clock, ..., the event reasons (last); power_of(fields) gives the watts (default:
    the fourth field, run-ab.sh's power.draw). nvidia-smi's local time is moved onto the epoch of the
    first sample."""
    rows = []
    for line in open(path):
        f = [x.strip() for x in line.split(",")]
        if len(f) < min_fields or not f[0][:1].isdigit():
            continue
        t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        rows.append((t, int(f[1].split()[0]), power_of(f), int(f[-1], 16)))
    if not rows:
        sys.exit(f"{path}: no samples")
    offset = first_epoch - rows[0][0]
    return [(t + offset, mhz, watts, why) for t, mhz, watts, why in rows]


def log_and_samples(log_path, csv_path, **kwargs):
    """A log's text and the samples of its CSV (samples(), kwargs passed on), the first sample's epoch
    from the log's "clocks sampled from EPOCH" line."""
    log = open(log_path).read()
    first = re.search(r"clocks sampled from ([0-9.]+)", log)
    if first is None:
        sys.exit(f"{log_path}: no 'clocks sampled from' line (run-ab.sh without CLOCKS=1?)")
    return log, samples(csv_path, float(first.group(1)), **kwargs)


def marked_runs(log):
    """(name, round, start, end) of each run of the log that run-ab.sh marked: a "===== NAME round R"
    line followed by its "-- start at" and "-- end at" lines before the next run's line (run-ab.sh
    marks only its model_step_bench runs; the others are skipped)."""
    runs, current, start = [], None, None
    for line in log.splitlines():
        m = re.match(r"===== (.+) round (\d+)$", line)
        if m:
            current, start = (m.group(1), m.group(2)), None
            continue
        m = re.match(r"-- (start|end) at ([0-9.]+)", line)
        if m and current is not None:
            if m.group(1) == "start":
                start = float(m.group(2))
            elif start is not None:
                runs.append((current[0], current[1], start, float(m.group(2))))
                current, start = None, None
    return runs


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ab_log")
    parser.add_argument("clocks_csv")
    parser.add_argument("--idle-watts", type=float, default=140.0)
    args = parser.parse_args()
    log, data = log_and_samples(args.ab_log, args.clocks_csv)
    top = max(mhz for _, mhz, _, _ in data)
    print(f"top SM clock {top} MHz; bursts per run: seconds from the run's start, mean / least SM clock, "
          f"most power, share of samples at the software power cap")
    for name, rnd, start, end in marked_runs(log):
        busy = [s for s in data if start <= s[0] <= end and (s[2] > args.idle_watts or s[1] < top)]
        bursts, cur = [], []
        for s in busy:
            if cur and s[0] - cur[-1][0] > 1.0:
                bursts.append(cur)
                cur = []
            cur.append(s)
        if cur:
            bursts.append(cur)
        parts = []
        for b in bursts:
            if len(b) < 5:  # start-up blips
                continue
            mean = sum(s[1] for s in b) / len(b)
            capped = sum(1 for s in b if s[3] & POWER_CAP) / len(b)
            parts.append(f"{b[0][0] - start:5.1f}-{b[-1][0] - start:5.1f} s: {mean:4.0f} / {min(s[1] for s in b)} MHz, "
                         f"{max(s[2] for s in b):3.0f} W, capped {100 * capped:3.0f}%")
        print(f"{name} round {rnd}: " + "; ".join(parts))


if __name__ == "__main__":
    main()
