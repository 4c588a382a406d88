#!/usr/bin/env python3
"""Generation throughput of a running df11d with and without a tight /metrics scrape loop.

Drives `--streams` concurrent Generate streams (token-id prompts, greedy, ignore_eos) for
`--seconds` per phase, first without scraping, then with one thread fetching /metrics back to back,
and prints one JSON object: tokens/s of each phase, scrapes/s, and the relative difference.
A benchmark, not a test (issue 7: scraping must not slow generation measurably). Run it on an
otherwise idle machine: the scraper, the Python client and a CPU-backend engine share the cores, so
on a busy or small machine the difference measures CPU contention, not the exporter.

usage: bench/metrics_scrape_bench.py --grpc 127.0.0.1:50051 --metrics http://127.0.0.1:8000/metrics \
           --model NAME [--streams 100] [--max-tokens 128] [--seconds 20] [--scrape-interval 0]
Needs Debian python3-grpcio and protobuf-compiler-grpc (stubs are generated from proto/df11.proto).
"""
import argparse
import json
import os
import sys
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "deploy"))
import df11_client  # noqa: E402


def run_phase(client, args, scrape):
    stop = threading.Event()
    tokens = [0] * args.streams
    scrapes = [0]
    scrape_seconds = []

    def stream(i):
        prompt = [(i * 7 + k) % 200 + 1 for k in range(16)]
        while not stop.is_set():
            for response in client.generate_stream(args.model, prompt, args.max_tokens):
                tokens[i] += len(response.token_ids)

    def scraper():
        while not stop.wait(args.scrape_interval):
            begin = time.time()
            urllib.request.urlopen(args.metrics, timeout=10).read()
            scrape_seconds.append(time.time() - begin)
            scrapes[0] += 1

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(args.streams)]
    if scrape:
        threads.append(threading.Thread(target=scraper))
    for t in threads:
        t.start()
    time.sleep(args.warmup)
    start_tokens, start_scrapes, start = sum(tokens), scrapes[0], time.time()
    time.sleep(args.seconds)
    end_tokens, end_scrapes, elapsed = sum(tokens), scrapes[0], time.time() - start
    stop.set()
    for t in threads:
        t.join()
    mean_ms = 1000 * sum(scrape_seconds) / len(scrape_seconds) if scrape_seconds else None
    return (end_tokens - start_tokens) / elapsed, (end_scrapes - start_scrapes) / elapsed, mean_ms


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grpc", required=True)
    p.add_argument("--metrics", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--streams", type=int, default=100)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--warmup", type=float, default=3)
    p.add_argument("--scrape-interval", type=float, default=0, help="seconds between scrapes (0 = back to back)")
    args = p.parse_args()
    client = df11_client.Client(ROOT, args.grpc)
    df11_client.wait_serving(client, args.model)
    base, _, _ = run_phase(client, args, scrape=False)
    scraped, scrapes_per_s, scrape_ms = run_phase(client, args, scrape=True)
    print(json.dumps({
        "streams": args.streams, "max_tokens": args.max_tokens, "seconds": args.seconds,
        "tokens_per_s_without_scrape": round(base, 1), "tokens_per_s_with_scrape": round(scraped, 1),
        "scrape_interval": args.scrape_interval, "scrapes_per_s": round(scrapes_per_s, 1),
        "scrape_ms_mean": round(scrape_ms, 3) if scrape_ms else None,
        "relative_change": round((scraped - base) / base, 4) if base else None,
    }))


if __name__ == "__main__":
    main()
