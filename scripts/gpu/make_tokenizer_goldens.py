#!/usr/bin/env python3
"""Writes the tokenizer goldens that tests/runtime/tokenizer_golden_test.cc compares against.

For every tokenizer directory (DIR/qwen3, DIR/gemma3, DIR/llama3_1, each with tokenizer.json and
tokenizer_config.json as scripts/fetch-test-tokenizers.sh lays them out) and every line of the
corpus (one JSON string per line), records:
  tokenizers    -- tokenizers.Tokenizer.from_file(DIR/x/tokenizer.json)
  transformers  -- transformers.AutoTokenizer.from_pretrained(DIR/x)
each with
  ids          encode(text, add_special_tokens=False)
  ids_special  encode(text, add_special_tokens=True)
  decode       tokenizers-library decode(ids_special, skip_special_tokens=False)
  decode_skip  tokenizers-library decode(ids_special, skip_special_tokens=True)
  decode_plain tokenizers-library decode(ids, skip_special_tokens=False)
(transformers also gets decode_transformers: tokenizer.decode(ids_special), with its clean-up),
plus single-thread encode throughput of the `tokenizers` library on the corpus joined with "\\n"
and repeated to about 20 MB, one encode call per repetition (bench/tokenizer_bench.cc does the
same). Usage:
  python3 scripts/gpu/make_tokenizer_goldens.py --tokenizers ~/.cache/df11-serve/tokenizers \\
      --corpus tests/fixtures/tokenizer/corpus.jsonl --out tests/fixtures/tokenizer/goldens.json
"""
import os

# Single-threaded measurements: set before `tokenizers` is imported.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import argparse
import hashlib
import json
import platform
import sys
import time

import tokenizers
import transformers

NAMES = ["qwen3", "gemma3", "llama3_1"]
BENCH_BYTES = 20 * 1000 * 1000


def record(encode, backend_decode, corpus):
    out = {"ids": [], "ids_special": [], "decode": [], "decode_skip": [], "decode_plain": []}
    for text in corpus:
        ids = encode(text, False)
        ids_special = encode(text, True)
        out["ids"].append(ids)
        out["ids_special"].append(ids_special)
        out["decode"].append(backend_decode(ids_special, False))
        out["decode_skip"].append(backend_decode(ids_special, True))
        out["decode_plain"].append(backend_decode(ids, False))
    return out


def throughput(tok, corpus):
    document = "\n".join(corpus)
    size = len(document.encode("utf-8"))
    reps = max(1, BENCH_BYTES // size)
    tok.encode(document, add_special_tokens=False)  # warm-up
    start = time.perf_counter()
    n_tokens = 0
    for _ in range(reps):
        n_tokens += len(tok.encode(document, add_special_tokens=False).ids)
    seconds = time.perf_counter() - start
    return {"bytes": size * reps, "seconds": seconds, "mb_per_s": size * reps / seconds / 1e6,
            "tokens": n_tokens, "document_bytes": size, "repetitions": reps}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokenizers", required=True, help="directory with qwen3/ gemma3/ llama3_1/ subdirectories")
    parser.add_argument("--corpus", required=True, help="JSON-lines file, one JSON string per line")
    parser.add_argument("--out", required=True, help="goldens JSON to write")
    parser.add_argument("--no-bench", action="store_true", help="skip the throughput measurement")
    args = parser.parse_args()

    with open(args.corpus, "rb") as f:
        raw = f.read()
    corpus = [json.loads(line) for line in raw.decode("utf-8").split("\n") if line.strip()]
    result = {
        "generator": {
            "script": "scripts/gpu/make_tokenizer_goldens.py",
            "tokenizers": tokenizers.__version__,
            "transformers": transformers.__version__,
            "python": sys.version.split()[0],
            "machine": platform.platform(),
            "processor": platform.processor(),
        },
        "corpus_sha256": hashlib.sha256(raw).hexdigest(),
        "corpus_lines": len(corpus),
        "corpus": corpus,
        "tokenizers": {},
    }
    for name in NAMES:
        path = os.path.join(args.tokenizers, name)
        print(f"{name}: {path}", file=sys.stderr)
        tok = tokenizers.Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
        entry = {"tokenizers": record(lambda t, s: tok.encode(t, add_special_tokens=s).ids,
                                      lambda ids, skip: tok.decode(ids, skip_special_tokens=skip), corpus)}
        auto = transformers.AutoTokenizer.from_pretrained(path)
        backend = auto.backend_tokenizer
        entry["transformers"] = record(lambda t, s: list(auto(t, add_special_tokens=s)["input_ids"]),
                                       lambda ids, skip: backend.decode(ids, skip_special_tokens=skip), corpus)
        entry["transformers"]["class"] = type(auto).__name__
        entry["transformers"]["decode_transformers"] = [auto.decode(ids) for ids in entry["transformers"]["ids_special"]]
        if not args.no_bench:
            entry["throughput"] = throughput(tok, corpus)
            print(f"  {entry['throughput']['mb_per_s']:.2f} MB/s", file=sys.stderr)
        result["tokenizers"][name] = entry
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
