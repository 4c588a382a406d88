#!/usr/bin/env python3
"""Interoperability check, run once on the GPU machine: a model made by `df11 compress` loads in
the reference dfloat11 package (LeanModels/DFloat11, a copy carried in an ignored folder, never
committed) and gives back the original weights, and its forward pass gives the same logits as the
original BF16 model. Also checks the reverse: our reader reads what the reference encoder writes.

Usage: check_reference_load.py --df11-cli BUNDLE/run --ref REF_PARENT_DIR --out OUT_DIR
(REF_PARENT_DIR contains the package folder `dfloat11/`.)
"""
import argparse, contextlib, importlib, json, os, shutil, subprocess, sys, types

import torch


def stub_missing_modules():
    # The reference package imports these at module level; loading does not use them.
    try:
        import dahuffman  # noqa: F401
    except ImportError:
        m = types.ModuleType("dahuffman")
        class HuffmanCodec:  # only used by the reference *encoder*
            pass
        m.HuffmanCodec = HuffmanCodec
        sys.modules["dahuffman"] = m
    try:
        import pkg_resources  # noqa: F401
    except ImportError:
        m = types.ModuleType("pkg_resources")
        m.resource_filename = lambda pkg, name: os.path.join(os.path.dirname(importlib.import_module(pkg).__file__), name)
        sys.modules["pkg_resources"] = m
    import transformers.modeling_utils as mu
    if not hasattr(mu, "no_init_weights"):
        mu.no_init_weights = contextlib.nullcontext


def make_model(kind, path):
    from transformers import AutoConfig, AutoModelForCausalLM
    torch.manual_seed(0)
    if kind == "qwen3":
        cfg = AutoConfig.for_model("qwen3", vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=3,
                                   num_attention_heads=8, num_key_value_heads=4, head_dim=32, tie_word_embeddings=False)
    else:
        cfg = AutoConfig.for_model("llama", vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=3,
                                   num_attention_heads=8, num_key_value_heads=2, tie_word_embeddings=True)
    cfg.architectures = ["Qwen3ForCausalLM" if kind == "qwen3" else "LlamaForCausalLM"]
    model = AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0, 0.02)
    model.save_pretrained(path, safe_serialization=True)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--df11-cli", required=True)
    ap.add_argument("--ref", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    work = "/tmp/df11-refcheck"
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    # Fresh PTX of the reference kernel for this GPU.
    pkg = os.path.join(work, "refpkg", "dfloat11")
    shutil.copytree(os.path.join(args.ref, "dfloat11"), pkg)
    subprocess.run(["nvcc", "-O3", "-ptx", "-arch=sm_90", os.path.join(pkg, "decode.cu"), "-o",
                    os.path.join(pkg, "decode.ptx")], check=True)
    sys.path.insert(0, os.path.join(work, "refpkg"))
    stub_missing_modules()
    from dfloat11 import DFloat11Model
    results = {}
    for kind in ["qwen3", "llama"]:
        bf16_dir, df11_dir = f"{work}/{kind}-bf16", f"{work}/{kind}-df11"
        make_model(kind, bf16_dir)
        # The BF16 baseline is the saved checkpoint loaded the usual way (a model cast with
        # .to(bfloat16) would also cast its RoPE buffers and differ for that reason alone).
        from transformers import AutoModelForCausalLM
        original = AutoModelForCausalLM.from_pretrained(bf16_dir, dtype=torch.bfloat16).cuda().eval()
        for cmd in (["compress", bf16_dir, df11_dir], ["verify", df11_dir, bf16_dir], ["inspect", df11_dir]):
            r = subprocess.run([args.df11_cli, "df11", *cmd], capture_output=True, text=True)
            print(f"df11 {cmd[0]}: rc={r.returncode}\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
            assert r.returncode == 0, f"df11 {cmd[0]} failed"
        model = DFloat11Model.from_pretrained(df11_dir, device="cuda")
        model.eval()
        # Decode every unit through the reference hooks and compare each weight with the original.
        ref_sd = original.state_dict()
        checked = 0
        for name, module in model.named_modules():
            if not hasattr(module, "encoded_exponent"):
                continue
            for hook in module._forward_pre_hooks.values():
                hook(module, None)
            targets = getattr(module, "weight_injection_modules", None)
            pairs = []
            if targets is None:
                pairs.append((name + ".weight", module.weight))
            else:
                sub_names = {id(m): n for n, m in model.named_modules()}
                pairs += [(sub_names[id(t)] + ".weight", t.weight) for t in targets]
            for wname, w in pairs:
                want = ref_sd[wname]
                assert w.shape == want.shape, (wname, w.shape, want.shape)
                assert torch.equal(w.view(torch.int16), want.view(torch.int16)), f"{wname}: weights differ"
                checked += 1
        ids = torch.randint(0, 1024, (2, 17), device="cuda")
        with torch.no_grad():
            a = original(ids).logits
            b = model(ids).logits
        same = torch.equal(a.view(torch.int16) if a.dtype == torch.bfloat16 else a, b.view(torch.int16) if b.dtype == torch.bfloat16 else b)
        print(f"{kind}: reference package decoded {checked} weights bit-exactly; logits identical: {same}; "
              f"max |diff| {(a.float() - b.float()).abs().max().item()}")
        assert same, "logits differ"
        results[kind] = {"weights_checked": checked, "logits_identical": bool(same)}
    with open(os.path.join(args.out, "reference_load.json"), "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "transformers": importlib.import_module("transformers").__version__, "results": results}, f, indent=2)
    print("REFERENCE LOAD CHECK PASSED")


if __name__ == "__main__":
    main()
