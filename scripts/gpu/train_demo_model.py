#!/usr/bin/env python3
"""Trains df11-serve's demo model: a ~6M-parameter Llama on Python code, so the quick start prints
readable text on a machine without a GPU.

Data (offline, PSF-licensed): every *.py file of this Python's standard library
(sysconfig.get_paths()["stdlib"]) and the pydoc topic texts (pydoc_data.topics). 2% of the files,
picked by a hash of their path, are held out for a validation loss.

Writes to --out:
  tokenizer.json         byte-level BPE (HF tokenizers), vocab --vocab, special "<|endoftext|>"
  tokenizer_config.json  eos "<|endoftext|>", no bos, model_max_length 512
  config.json, model.safetensors   LlamaForCausalLM in BF16 (transformers save_pretrained)
  generation_config.json eos id, greedy by default
  reference.json         for each prompt: prompt ids, 48 greedy tokens (ignoring eos) from the
                         saved BF16 weights run (a) in fp32 on the CPU and (b) in bf16 on the GPU
                         (null without one), token ids and decoded text; leading agreeing steps
  README.md, LICENSE-PSF.txt   what was used, how, and the license note
Usage (about --minutes + 1 minutes on one H100; no internet):
  python3 scripts/gpu/train_demo_model.py --out $OUT/demo --minutes 5
The learning rate follows a cosine over wall time, so training stops after --minutes however fast
the GPU is. Then: df11 compress $OUT/demo <dir> (BF16 -> DF11) and commit <dir>.
"""
import argparse
import glob
import hashlib
import json
import math
import os
import sys
import sysconfig
import time

import torch
import torch.nn.functional as F
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

EOT = "<|endoftext|>"
SEQ = 512
PROMPTS = ["def fibonacci(n):", "import os\n", "class Stack:"]
REF_STEPS = 48


def log(msg):
    print(msg, flush=True)


def stdlib_documents():
    """(name, text) of every stdlib .py file and pydoc topic, in a fixed order."""
    root = sysconfig.get_paths()["stdlib"]
    docs = []
    for path in sorted(glob.glob(os.path.join(root, "**", "*.py"), recursive=True)):
        if "site-packages" in path or "dist-packages" in path:
            continue
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (UnicodeDecodeError, OSError):
            continue
        if text.strip():
            docs.append((os.path.relpath(path, root), text))
    n_py = len(docs)
    try:
        from pydoc_data import topics

        for name in sorted(topics.topics):
            docs.append(("pydoc_data.topics:" + name, topics.topics[name]))
    except ImportError:
        log("note: pydoc_data not available; training on the .py files only")
    return root, docs, n_py


def held_out(name):
    return hashlib.sha1(name.encode()).digest()[0] < 6  # ~2.3%


def train_tokenizer(texts, vocab):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab, min_frequency=2, special_tokens=[EOT], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    return tok


def encode_corpus(tok, texts, eot_id):
    """One flat int32 tensor: documents separated by <|endoftext|>."""
    ids = []
    for enc in tok.encode_batch(texts, add_special_tokens=False):
        ids.extend(enc.ids)
        ids.append(eot_id)
    return torch.tensor(ids, dtype=torch.int32)


def make_config(vocab, eot_id):
    common = dict(vocab_size=vocab, hidden_size=256, intermediate_size=768, num_hidden_layers=6,
                  num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=SEQ, rms_norm_eps=1e-5,
                  tie_word_embeddings=True, hidden_act="silu", bos_token_id=None, eos_token_id=eot_id,
                  pad_token_id=eot_id, attention_bias=False, mlp_bias=False)
    for extra in (dict(rope_parameters=dict(rope_type="default", rope_theta=10000.0)), dict(rope_theta=10000.0)):
        try:
            config = transformers.LlamaConfig(**common, **extra)
        except (TypeError, ValueError) as e:
            log(f"note: LlamaConfig rejected {list(extra)}: {e}")
            continue
        return config
    raise SystemExit("cannot build a LlamaConfig")


def batch(data, size, gen, device):
    """size random windows of SEQ + 1 tokens of data (on device): inputs and next-token targets."""
    starts = torch.randint(0, data.numel() - SEQ - 1, (size, 1), generator=gen).to(device)
    rows = data[starts + torch.arange(SEQ + 1, device=device)].long()
    return rows[:, :-1], rows[:, 1:]


def loss_of(model, x, y, device):
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
        logits = model(input_ids=x).logits
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))


@torch.no_grad()
def val_loss(model, data, device, batches=8, size=32):
    model.eval()
    gen = torch.Generator().manual_seed(7)
    total = sum(float(loss_of(model, *batch(data, size, gen, device), device)) for _ in range(batches)) / batches
    model.train()
    return total


def train(model, train_ids, val_ids, args, device):
    """AdamW, warmup then cosine over wall time; keeps the weights of the best validation loss
    (checked every 30 s: the corpus is small enough to overfit in a few minutes)."""
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1,
                            **({"fused": True} if device.type == "cuda" else {}))
    train_ids, val_ids = train_ids.to(device), val_ids.to(device)
    gen = torch.Generator().manual_seed(1)
    budget, warmup = args.minutes * 60.0, 100
    start, step, last_print, last_val = time.time(), 0, 0.0, 0.0
    best = (float("inf"), 0, None)
    while True:
        now = time.time() - start
        if now >= budget:
            break
        lr = args.lr * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * now / budget)))
        for group in opt.param_groups:
            group["lr"] = lr
        loss = loss_of(model, *batch(train_ids, args.batch, gen, device), device)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if now - last_print >= 15 or step == 1:
            last_print = now
            seen = step * args.batch * SEQ
            log(f"step {step:6d}  {now:5.0f} s  lr {lr:.2e}  loss {float(loss):.3f}  "
                f"tokens {seen / 1e6:.0f}M ({seen / train_ids.numel():.1f} epochs)")
        if now - last_val >= 30:
            last_val = now
            best = keep_best(model, val_ids, device, step, best)
    best = keep_best(model, val_ids, device, step, best)
    model.load_state_dict(best[2])
    log(f"trained {step} steps in {time.time() - start:.0f} s; kept step {best[1]}: validation loss "
        f"{best[0]:.3f} (ppl {math.exp(best[0]):.1f})")
    return best[1], best[0]


def keep_best(model, val_ids, device, step, best):
    vl = val_loss(model, val_ids, device)
    log(f"  validation loss {vl:.3f} at step {step}{'  (best)' if vl < best[0] else ''}")
    if vl < best[0]:
        return vl, step, {k: v.detach().clone() for k, v in model.state_dict().items()}
    return best


def from_pretrained(path, dtype, device):
    try:
        model = transformers.LlamaForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="eager")
    except TypeError:
        model = transformers.LlamaForCausalLM.from_pretrained(path, torch_dtype=dtype, attn_implementation="eager")
    return model.to(device).eval()


@torch.no_grad()
def greedy(model, prompt_ids, device):
    """REF_STEPS greedy tokens, full recompute each step, eos not special."""
    ids = torch.tensor([prompt_ids], device=device)
    out = []
    for _ in range(REF_STEPS):
        nxt = int(model(input_ids=ids).logits[0, -1].float().argmax())
        out.append(nxt)
        ids = torch.cat([ids, torch.tensor([[nxt]], device=device)], dim=1)
    return out


def write_references(out, tok):
    cpu = from_pretrained(out, torch.float32, torch.device("cpu"))
    gpu = from_pretrained(out, torch.bfloat16, torch.device("cuda")) if torch.cuda.is_available() else None
    refs = []
    for prompt in PROMPTS:
        ids = tok.encode(prompt, add_special_tokens=False).ids
        a = greedy(cpu, ids, torch.device("cpu"))
        b = greedy(gpu, ids, torch.device("cuda")) if gpu is not None else None
        agree = None if b is None else next((i for i in range(REF_STEPS) if a[i] != b[i]), REF_STEPS)
        refs.append(dict(prompt=prompt, prompt_ids=ids,
                         greedy_fp32_cpu=dict(ids=a, text=tok.decode(a, skip_special_tokens=False)),
                         greedy_bf16_gpu=None if b is None else dict(ids=b, text=tok.decode(b, skip_special_tokens=False)),
                         agreeing_steps=agree))
        log(f"--- {prompt!r} (fp32 CPU greedy):\n{prompt}{refs[-1]['greedy_fp32_cpu']['text']}\n---")
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(dict(steps=REF_STEPS, ignore_eos=True, transformers=transformers.__version__,
                       torch=torch.__version__, gpu=torch.cuda.get_device_name() if gpu is not None else None,
                       prompts=refs), f, indent=1)


def write_side_files(out, tok, eot_id, stdlib_root, info):
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(dict(tokenizer_class="PreTrainedTokenizerFast", eos_token=EOT, bos_token=None, pad_token=EOT,
                       unk_token=None, add_bos_token=False, add_eos_token=False, model_max_length=SEQ,
                       clean_up_tokenization_spaces=False), f, indent=1)
    with open(os.path.join(out, "generation_config.json"), "w") as f:
        json.dump(dict(eos_token_id=eot_id, pad_token_id=eot_id, do_sample=False, max_new_tokens=128), f, indent=1)
    license_src = next((p for p in (os.path.join(stdlib_root, "LICENSE.txt"),
                                    os.path.join(sys.base_prefix, "LICENSE.txt")) if os.path.exists(p)), None)
    if license_src:
        with open(license_src, encoding="utf-8") as src, open(os.path.join(out, "LICENSE-PSF.txt"), "w") as dst:
            dst.write(src.read())
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(f"""# df11-serve demo model

A {info['params'] / 1e6:.1f}M-parameter Llama ({info['shape']}) trained by
`scripts/gpu/train_demo_model.py` for {info['minutes']} minutes on {info['device']} (batches of
{info['batch']} x {SEQ} tokens); these are the weights after step {info['steps']}, the best
validation loss seen ({info['val_loss']:.3f}).
It writes Python-looking text; it is a demo of the serving path, not a useful model.

## Training data
The Python {sys.version.split()[0]} standard library sources ({info['n_py']} `*.py` files under
`{stdlib_root}`) and the pydoc topic texts (`pydoc_data.topics`, {info['n_docs'] - info['n_py']}
entries): {info['chars'] / 1e6:.1f}M characters, {info['tokens'] / 1e6:.2f}M tokens; ~2% of the
files held out for validation.

## License
Python and its standard library and documentation are distributed under the Python Software
Foundation License Version 2 (an OSI-approved, GPL-compatible permissive license); see
LICENSE-PSF.txt{'' if license_src else ' (not found on the training machine: see https://docs.python.org/3/license.html)'}.
The model weights and tokenizer are derived from that text and are released under the same terms.

## Tokenizer
Byte-level BPE (HF tokenizers {__import__('tokenizers').__version__}), vocabulary {tok.get_vocab_size()},
no prefix space, `{EOT}` (id {eot_id}) separates documents and is the eos token; no bos.
""")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--minutes", type=float, default=5.0)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=64, help="sequences of 512 tokens per step")
    ap.add_argument("--lr", type=float, default=2e-3)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    t0 = time.time()

    stdlib_root, docs, n_py = stdlib_documents()
    chars = sum(len(t) for _, t in docs)
    log(f"data: {n_py} stdlib .py files + {len(docs) - n_py} pydoc topics, {chars / 1e6:.1f}M chars from {stdlib_root}")
    tok = train_tokenizer([t for _, t in docs], args.vocab)
    tok.save(os.path.join(args.out, "tokenizer.json"))
    eot_id = tok.token_to_id(EOT)
    train_ids = encode_corpus(tok, [t for n, t in docs if not held_out(n)], eot_id)
    val_ids = encode_corpus(tok, [t for n, t in docs if held_out(n)], eot_id)
    log(f"tokenizer: vocab {tok.get_vocab_size()}, eot id {eot_id}; train {train_ids.numel() / 1e6:.2f}M tokens, "
        f"validation {val_ids.numel() / 1e6:.2f}M ({time.time() - t0:.0f} s)")

    config = make_config(tok.get_vocab_size(), eot_id)
    model = transformers.LlamaForCausalLM(config).to(device).train()
    params = sum(p.numel() for p in model.parameters())
    log(f"model: {params / 1e6:.2f}M parameters on {device}")
    steps, vl = train(model, train_ids, val_ids, args, device)

    model.to(torch.bfloat16).save_pretrained(args.out)
    info = dict(params=params, steps=steps, batch=args.batch, minutes=args.minutes, val_loss=vl, n_py=n_py,
                n_docs=len(docs), chars=chars, tokens=train_ids.numel() + val_ids.numel(),
                device=torch.cuda.get_device_name() if device.type == "cuda" else "CPU",
                shape="hidden 256, 6 layers, 8 heads, 4 KV heads, MLP 768, vocab %d, tied embeddings" % tok.get_vocab_size())
    write_side_files(args.out, tok, eot_id, stdlib_root, info)
    try:  # the directory must load as a transformers tokenizer too
        hf_tok = transformers.AutoTokenizer.from_pretrained(args.out)
        same = all(hf_tok.encode(p, add_special_tokens=False) == tok.encode(p, add_special_tokens=False).ids
                   for p in PROMPTS)
        log(f"AutoTokenizer loads the directory; encodes the prompts identically: {same}")
    except Exception as e:  # noqa: BLE001 - report, the tokenizer.json is what df11-serve reads
        log(f"WARNING: AutoTokenizer could not load {args.out}: {type(e).__name__}: {e}")
    write_references(args.out, tok)
    log(f"done in {time.time() - t0:.0f} s: {sorted(os.listdir(args.out))}")


if __name__ == "__main__":
    main()
