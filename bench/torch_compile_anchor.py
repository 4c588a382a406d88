#!/usr/bin/env python3
"""The anchor of model_step_bench: transformers with a static KV cache + torch.compile on the
Qwen3-8B shape (36 layers, hidden 4096, 32/8 heads,
head_dim 128, intermediate 12288, vocab 151936), random bf16 weights N(0, 0.02), on this GPU.

Per-token decode time at batch B = (t(n2 new tokens) - t(n1 new tokens)) / (n2 - n1) after a
prompt of P random tokens, so prefill and compilation drop out; medians of --reps timed pairs
after one warm-up generate of each length (which compiles). Greedy, min_new_tokens = max_new_tokens.
Compilation: generate() compiles the forward itself when the cache is static (transformers 5:
generation_config.compile_config, CUDA graphs); wrapping model.forward in torch.compile with
mode="reduce-overhead" as older docs show fails in transformers 5.17 (CUDA-graph outputs
overwritten between generate calls).
Usage (GPU machine): python3 bench/torch_compile_anchor.py --batches 1,8,64,128 --prompt 512 --json OUT
"""
import argparse
import json
import statistics
import time

import torch
import transformers


def generate_seconds(model, ids, n):
    torch.cuda.synchronize()
    start = time.perf_counter()
    model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, min_new_tokens=n,
                   do_sample=False, pad_token_id=0)
    torch.cuda.synchronize()
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", default="1,8,64,128")
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--n1", type=int, default=16)
    parser.add_argument("--n2", type=int, default=80)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()
    config = transformers.Qwen3Config(vocab_size=151936, hidden_size=4096, intermediate_size=12288,
                                      num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
                                      head_dim=128, max_position_embeddings=40960, tie_word_embeddings=False,
                                      initializer_range=0.02)
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = transformers.Qwen3ForCausalLM(config).eval()
    model.generation_config.cache_implementation = "static"
    result = dict(gpu=torch.cuda.get_device_name(0), transformers=transformers.__version__, torch=torch.__version__,
                  prompt=args.prompt, n1=args.n1, n2=args.n2, reps=args.reps,
                  method="transformers static cache + generate()'s own torch.compile; per-token = "
                         "(t(n2) - t(n1)) / (n2 - n1), medians", decode=[])
    print(f"{result['gpu']}: transformers {transformers.__version__}, torch {torch.__version__}", flush=True)
    for batch in [int(b) for b in args.batches.split(",")]:
        ids = torch.randint(0, config.vocab_size, (batch, args.prompt), device="cuda")
        start = time.perf_counter()
        with torch.no_grad():
            generate_seconds(model, ids, args.n1)  # compiles
            generate_seconds(model, ids, args.n2)
            pairs = [(generate_seconds(model, ids, args.n1), generate_seconds(model, ids, args.n2))
                     for _ in range(args.reps)]
        t1 = statistics.median(p[0] for p in pairs)
        t2 = statistics.median(p[1] for p in pairs)
        step_ms = (t2 - t1) / (args.n2 - args.n1) * 1e3
        result["decode"].append(dict(batch=batch, step_ms=step_ms, t_n1_s=t1, t_n2_s=t2))
        print(f"  decode batch {batch:4d}: {step_ms:8.3f} ms/step  (t({args.n1}) {t1:.3f} s, t({args.n2}) {t2:.3f} s;"
              f" {time.perf_counter() - start:.0f} s with compilation)", flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
