#!/usr/bin/env python3
"""Makes the Hugging Face reference fixtures of the CPU runtime (tests/runtime/model_hf_test.cc).

For each supported architecture it builds a tiny random model with transformers (real head/group
structure, vocab 512, hidden 64, weights with std 0.15 so logits separate), saves it as BF16
safetensors in OUT/<arch>/ with config.json as transformers writes it, plus config_v4.json: the
same config in transformers 4.5x style (rope_theta/rope_scaling/rope_local_base_freq/
sliding_window_pattern instead of rope_parameters/layer_types), then records in expected.json:
  prompt                the fixed prompt token ids
  logits_positions      prompt positions whose logits are recorded
  logits_fp32_cpu       (a) full-vocab logits at those positions, model in fp32 on the CPU
  logits_bf16_gpu       (b) the same from the model in bf16 on the GPU (null without a GPU)
  attention             the attn_implementation of both runs: "sdpa" (FlashAttention's numerics),
                        "eager" for Gemma 3, whose attention soft-cap sdpa does not apply
  greedy_fp32_cpu       (a) 32 greedy tokens after the prompt (full recompute every step)
  greedy_bf16_gpu       (b) the same in bf16 on the GPU
  agreeing_steps        leading steps where (a) and (b) pick the same token
  config_files          the config files the test runs the model with
The weights the fp32 reference runs are exactly the saved BF16 values (it loads the saved
directory). Usage (about a minute with a GPU, no internet needed):
  python3 scripts/gpu/make_hf_fixtures.py --out /tmp/hf_fixtures
  cp -r /tmp/hf_fixtures/* tests/fixtures/models/
"""
import argparse
import copy
import json
import math
import os
import sys
import tempfile

import torch
import transformers

VOCAB = 512
PROMPT_LEN = 24  # unless an architecture sets prompt_len
STEPS = 32
STD = 0.15


def logits_positions(prompt_len):
    """Prompt positions whose logits are recorded: the first, a few inside, the last."""
    inner = [7, 15] if prompt_len <= 64 else [63, 64, 127]
    return [0] + [p for p in inner if p < prompt_len - 1] + [prompt_len - 1]


class FixtureError(Exception):
    pass


def log(msg):
    print(msg, flush=True)


COMMON = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
              rms_norm_eps=1e-6, pad_token_id=0, bos_token_id=1, eos_token_id=2)

# name -> (config class, model class, kwargs in transformers 5 style, legacy kwargs fallback,
#          expected rope: {"full": RopeSpec, "sliding": RopeSpec or None}, head_dim)
ARCHS = {
    "llama": dict(
        config="LlamaConfig", model="LlamaForCausalLM", head_dim=16,
        v5=dict(COMMON, tie_word_embeddings=False,
                rope_parameters=dict(rope_type="llama3", rope_theta=10000.0, factor=8.0, low_freq_factor=1.0,
                                     high_freq_factor=4.0, original_max_position_embeddings=64)),
        legacy=dict(COMMON, tie_word_embeddings=False, rope_theta=10000.0,
                    rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                                      original_max_position_embeddings=64)),
        rope=dict(full=dict(type="llama3", theta=10000.0, factor=8.0, low=1.0, high=4.0, orig=64, partial=1.0))),
    "mistral": dict(
        config="MistralConfig", model="MistralForCausalLM", head_dim=24,
        v5=dict(COMMON, head_dim=24, sliding_window=None, tie_word_embeddings=False,
                rope_parameters=dict(rope_type="default", rope_theta=100000.0)),
        legacy=dict(COMMON, head_dim=24, sliding_window=None, tie_word_embeddings=False, rope_theta=100000.0),
        rope=dict(full=dict(type="default", theta=100000.0, partial=1.0))),
    "qwen2": dict(
        config="Qwen2Config", model="Qwen2ForCausalLM", head_dim=16,
        v5=dict(COMMON, tie_word_embeddings=True, use_sliding_window=False,
                rope_parameters=dict(rope_type="default", rope_theta=10000.0)),
        legacy=dict(COMMON, tie_word_embeddings=True, use_sliding_window=False, rope_theta=10000.0),
        rope=dict(full=dict(type="default", theta=10000.0, partial=1.0))),
    "qwen3": dict(
        config="Qwen3Config", model="Qwen3ForCausalLM", head_dim=32,
        v5=dict(COMMON, head_dim=32, tie_word_embeddings=False, use_sliding_window=False, attention_bias=False,
                rope_parameters=dict(rope_type="default", rope_theta=1000000.0)),
        legacy=dict(COMMON, head_dim=32, tie_word_embeddings=False, use_sliding_window=False, attention_bias=False,
                    rope_theta=1000000.0),
        rope=dict(full=dict(type="default", theta=1000000.0, partial=1.0))),
    # Qwen3's head dim (128) and a 160-token prompt: on an H100 the CUDA prefill runs the Hopper
    # attention kernel (head dims 65..128) over 3 query tiles of 64 tokens (group 2: 128 rows a
    # block) and 2 key tiles of 128, and the decode steps split their keys.
    "qwen3_hd128": dict(
        config="Qwen3Config", model="Qwen3ForCausalLM", head_dim=128, prompt_len=160,
        v5=dict(COMMON, head_dim=128, tie_word_embeddings=False, use_sliding_window=False, attention_bias=False,
                rope_parameters=dict(rope_type="default", rope_theta=1000000.0)),
        legacy=dict(COMMON, head_dim=128, tie_word_embeddings=False, use_sliding_window=False, attention_bias=False,
                    rope_theta=1000000.0),
        rope=dict(full=dict(type="default", theta=1000000.0, partial=1.0))),
    "phi3": dict(
        config="Phi3Config", model="Phi3ForCausalLM", head_dim=16,
        v5=dict(COMMON, tie_word_embeddings=False, sliding_window=None, original_max_position_embeddings=512,
                rope_parameters=dict(rope_type="default", rope_theta=10000.0, partial_rotary_factor=0.5)),
        legacy=dict(COMMON, tie_word_embeddings=False, sliding_window=None, original_max_position_embeddings=512,
                    rope_theta=10000.0, partial_rotary_factor=0.5),
        rope=dict(full=dict(type="default", theta=10000.0, partial=0.5))),
    "gemma3": dict(
        config="Gemma3TextConfig", model="Gemma3ForCausalLM", head_dim=32, attention="eager",
        v5=dict(COMMON, num_hidden_layers=4, head_dim=32, hidden_activation="gelu_pytorch_tanh",
                query_pre_attn_scalar=24, sliding_window=8, tie_word_embeddings=True,
                final_logit_softcapping=30.0, attn_logit_softcapping=50.0,
                layer_types=["sliding_attention", "full_attention"] * 2,
                rope_parameters=dict(full_attention=dict(rope_type="linear", factor=2.0, rope_theta=10000.0),
                                     sliding_attention=dict(rope_type="default", rope_theta=1000.0))),
        legacy=dict(COMMON, num_hidden_layers=4, head_dim=32, hidden_activation="gelu_pytorch_tanh",
                    query_pre_attn_scalar=24, sliding_window=8, tie_word_embeddings=True,
                    final_logit_softcapping=30.0, attn_logit_softcapping=50.0, sliding_window_pattern=2,
                    rope_theta=10000.0, rope_scaling=dict(rope_type="linear", factor=2.0),
                    rope_local_base_freq=1000.0),
        rope=dict(full=dict(type="linear", theta=10000.0, factor=2.0, partial=1.0),
                  sliding=dict(type="default", theta=1000.0, partial=1.0))),
}


def expected_inv_freq(spec, head_dim):
    """inv_freq as transformers' modeling_rope_utils computes it (fp32)."""
    dim = int(head_dim * spec.get("partial", 1.0))
    inv = 1.0 / (spec["theta"] ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    if spec["type"] == "linear":
        inv = inv / spec["factor"]
    elif spec["type"] == "llama3":
        factor, low, high, orig = spec["factor"], spec["low"], spec["high"], spec["orig"]
        low_wavelen, high_wavelen = orig / low, orig / high
        wavelen = 2 * math.pi / inv
        inv_l = torch.where(wavelen > low_wavelen, inv / factor, inv)
        smooth = (orig / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        inv = torch.where(medium, smoothed, inv_l)
    return inv


def check_rope(model, arch):
    """True when the model's inv_freq buffers hold the intended frequencies of every attention kind."""
    buffers = [b.detach().float().cpu() for n, b in model.named_buffers() if "inv_freq" in n]
    ok = True
    for kind, spec in arch["rope"].items():
        want = expected_inv_freq(spec, arch["head_dim"])
        found = any(b.shape == want.shape and torch.allclose(b, want, rtol=1e-6, atol=0) for b in buffers)
        if not found:
            log(f"    rope check: no inv_freq buffer matches the {kind} rope {spec} "
                f"(buffers: {[tuple(b.shape) for b in buffers]})")
            ok = False
    return ok


def attention_of(arch):
    """transformers' default sdpa attention (FlashAttention's numerics, what the CUDA kernel follows);
    eager for architectures with an attention soft-cap, which sdpa does not apply."""
    return arch.get("attention", "sdpa")


def set_attention(config, impl):
    try:
        config._attn_implementation = impl
    except Exception as e:  # noqa: BLE001 - older/newer spellings
        log(f"    note: cannot set {impl} attention on the config ({e}); using the default")


def build_model(name, arch):
    """Tries the transformers 5 kwargs first, then the legacy ones; returns a model whose rope checks."""
    config_cls = getattr(transformers, arch["config"])
    model_cls = getattr(transformers, arch["model"])
    for style in ("v5", "legacy"):
        try:
            config = config_cls(**copy.deepcopy(arch[style]))
            set_attention(config, attention_of(arch))
            torch.manual_seed(1234)
            model = model_cls(config).float().eval()
        except Exception as e:  # noqa: BLE001 - report and try the other style
            log(f"    {style} kwargs rejected by {arch['config']}: {type(e).__name__}: {e}")
            continue
        if check_rope(model, arch):
            log(f"    built with {style} kwargs")
            return model
    raise FixtureError(f"{name}: could not build {arch['model']} with the intended rope parameters")


@torch.no_grad()
def randomize(model, name):
    """Gaussian weights (std STD); norm weights near their identity (1, or 0 for Gemma's 1 + w)."""
    gen = torch.Generator().manual_seed(sum(map(ord, name)))
    for pname, p in model.named_parameters():
        noise = torch.randn(p.shape, generator=gen) * STD
        if "norm" in pname:
            p.copy_(noise if name == "gemma3" else 1.0 + noise)
        else:
            p.copy_(noise)


def from_pretrained(model_cls, path, dtype, device, impl):
    try:
        model = model_cls.from_pretrained(path, dtype=dtype, attn_implementation=impl)
    except TypeError:
        model = model_cls.from_pretrained(path, torch_dtype=dtype, attn_implementation=impl)
    return model.to(device).eval()


@torch.no_grad()
def run_reference(model, prompt, device):
    """Logits at logits_positions of the prompt and STEPS greedy tokens (full recompute)."""
    ids = torch.tensor([prompt], device=device)
    logits = model(input_ids=ids).logits[0].float().cpu()
    rows = [logits[p].tolist() for p in logits_positions(len(prompt))]
    tokens = []
    for _ in range(STEPS):
        nxt = int(model(input_ids=ids).logits[0, -1].float().argmax())
        tokens.append(nxt)
        ids = torch.cat([ids, torch.tensor([[nxt]], device=device)], dim=1)
    return rows, tokens


def legacy_config(config):
    """The transformers 4.5x spelling of a config.json written by transformers 5."""
    c = copy.deepcopy(config)
    rp = c.pop("rope_parameters", None)
    if rp is not None:
        if "full_attention" in rp or "sliding_attention" in rp:
            full = dict(rp.get("full_attention", {}))
            sliding = dict(rp.get("sliding_attention", {}))
            if "rope_theta" in sliding:
                c["rope_local_base_freq"] = sliding["rope_theta"]
        else:
            full = dict(rp)
        if "rope_theta" in full:
            c["rope_theta"] = full.pop("rope_theta")
        if "partial_rotary_factor" in full:
            c["partial_rotary_factor"] = full.pop("partial_rotary_factor")
        kind = full.get("rope_type", full.get("type", "default"))
        c["rope_scaling"] = full if kind != "default" else None
    types = c.pop("layer_types", None)
    if types is not None and c.get("model_type") == "gemma3_text":
        pattern = next((p for p in range(1, len(types) + 1)
                        if all((t == "sliding_attention") == bool((i + 1) % p) for i, t in enumerate(types))), None)
        if pattern is None:
            raise FixtureError(f"layer_types {types} follow no sliding_window_pattern")
        c["sliding_window_pattern"] = pattern
        c.pop("_sliding_window_pattern", None)  # transformers 5's private copy of the old default
    elif types is not None and any(t != "full_attention" for t in types):
        c["layer_types"] = types  # no 4.5x spelling: keep it
    c["transformers_version"] = "4.53.0"
    return c


def check_legacy_loads(path, config_v4, model_cls, arch):
    """Non-fatal: transformers itself reads config_v4.json into the same rope frequencies."""
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(config_v4, f)
        try:
            config = transformers.AutoConfig.from_pretrained(tmp)
            set_attention(config, attention_of(arch))
            if not check_rope(model_cls(config), arch):
                log("    warning: transformers reads config_v4.json with other rope frequencies")
        except Exception as e:  # noqa: BLE001
            log(f"    warning: transformers cannot read config_v4.json: {type(e).__name__}: {e}")


def make_fixture(name, arch, out_root, gpu):
    log(f"== {name}: {arch['model']}")
    out = os.path.join(out_root, name)
    os.makedirs(out, exist_ok=True)
    model = build_model(name, arch)
    randomize(model, name)
    model.to(torch.bfloat16).save_pretrained(out)
    with open(os.path.join(out, "config.json")) as f:
        config = json.load(f)
    config_v4 = legacy_config(config)
    with open(os.path.join(out, "config_v4.json"), "w") as f:
        json.dump(config_v4, f, indent=2)
    model_cls = getattr(transformers, arch["model"])
    check_legacy_loads(out, config_v4, model_cls, arch)

    gen = torch.Generator().manual_seed(7)
    prompt = [1] + torch.randint(3, VOCAB, (arch.get("prompt_len", PROMPT_LEN) - 1,), generator=gen).tolist()
    ref = from_pretrained(model_cls, out, torch.float32, "cpu", attention_of(arch))
    if not check_rope(ref, arch):
        raise FixtureError(f"{name}: the saved directory loads with other rope frequencies")
    logits_a, tokens_a = run_reference(ref, prompt, "cpu")
    logits_b = tokens_b = None
    agreeing = STEPS
    if gpu:
        logits_b, tokens_b = run_reference(from_pretrained(model_cls, out, torch.bfloat16, "cuda", attention_of(arch)), prompt,
                                          "cuda")
        agreeing = next((i for i, (a, b) in enumerate(zip(tokens_a, tokens_b)) if a != b), STEPS)
    expected = dict(architecture=arch["model"], transformers_version=transformers.__version__,
                    torch_version=torch.__version__, prompt=prompt, logits_positions=logits_positions(len(prompt)),
                    logits_fp32_cpu=logits_a, logits_bf16_gpu=logits_b, greedy_fp32_cpu=tokens_a,
                    greedy_bf16_gpu=tokens_b, agreeing_steps=agreeing, attention=attention_of(arch),
                    config_files=["config.json", "config_v4.json"])
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected, f)
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    spread = max(max(r) - min(r) for r in logits_a)
    log(f"    {size / 1e6:.2f} MB, logit spread {spread:.2f}, greedy fp32 {tokens_a[:8]}..., "
        f"fp32/bf16 agree for {agreeing}/{STEPS} steps")
    if size > 1.5e6:
        log(f"    warning: {out} is larger than ~1 MB")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="output directory (one sub-directory per architecture)")
    parser.add_argument("--only", nargs="*", choices=sorted(ARCHS), help="architectures to make (default: all)")
    parser.add_argument("--no-gpu", action="store_true", help="skip the bf16 GPU run (agreeing_steps = 32)")
    args = parser.parse_args()
    gpu = torch.cuda.is_available() and not args.no_gpu
    log(f"transformers {transformers.__version__}, torch {torch.__version__}, "
        f"GPU: {torch.cuda.get_device_name(0) if gpu else 'none (bf16 reference skipped)'}")
    torch.use_deterministic_algorithms(True, warn_only=True)
    failed = []
    for name in args.only or ARCHS:
        try:
            make_fixture(name, ARCHS[name], args.out, gpu)
        except Exception as e:  # noqa: BLE001 - report every architecture, then fail
            log(f"    FAILED: {type(e).__name__}: {e}")
            failed.append(name)
    if failed:
        sys.exit(f"error: no fixture for {', '.join(failed)} (see above); the others are in {args.out}")
    log(f"done: copy {args.out}/* to tests/fixtures/models/")


if __name__ == "__main__":
    main()
