#!/usr/bin/env python3
"""Writes bench/results/gpu_<device>.md from the JSON lines of rpe-bench-model and hf_bench.py.

MFU = tokens/s x useful training FLOPs per token / the device's peak dense bf16 FLOP/s.
Useful FLOPs per token (training = 3x forward, both implementations counted alike):
  6 * layers * (4 D^2 + 2 D F)      dense layers (Q, K, V, O, FFN)
  12 * layers * L * D               attention scores q k^T and probabilities x V
  6 * 0.15 * (D^2 + D V)            MLM head on the 15% masked tokens
Position-method extras (relative tables, gates) are not counted: they are overhead.
Usage: gpu_report.py --device-name NAME --out FILE [--peak-tflops X] [--note TEXT] JSONL...
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from atomic_file import write_atomic  # noqa: E402

# The Hugging Face position type that computes what one of our methods does: absolute with
# SDPA; relative_key is Shaw et al.'s key term (what `shaw` computes by default), and
# relative_key_query Huang et al.'s method 4.
HF_PEER = {"absolute": "absolute-sdpa", "shaw": "relative_key", "m4": "relative_key_query"}

PEAK_BF16_TFLOPS = {"H100": 989.4, "H200": 989.4, "A100": 312.0, "L40S": 362.1, "A10": 125.0}


def flops_per_token(r):
    d, f, layers, v, length = r["hidden"], r["ffn"], r["layers"], r["vocab"], r["length"]
    return 6 * layers * (4 * d * d + 2 * d * f) + 12 * layers * length * d + 6 * 0.15 * (d * d + d * v)


def median_rows(rows):
    """One row per (impl, method, length): the one with the median tokens/s where a case was run
    several times (a shared CPU drifts by 20%). Returns (rows in first-seen order, most runs)."""
    groups = {}
    for r in rows:
        groups.setdefault((r["impl"], r["method"], r["length"]), []).append(r)
    picked = [sorted(g, key=lambda r: r["tokens_per_s"])[(len(g) - 1) // 2] for g in groups.values()]
    return picked, max((len(g) for g in groups.values()), default=0)


def optimizer_section(rows):
    """The optimizer-step table (bench/optim_bench.cpp): time and top-level ops per step."""
    base = next((r for r in rows if r["optimizer"] == "adamw-libtorch"), None)
    out = ["## Optimizer step", "",
           f"One step over the model's {rows[0]['tensors']} parameter tensors ({rows[0]['parameters']:,} "
           "parameters), the decay groups training uses; ops = top-level ATen ops, each one kernel launch on CUDA "
           "(a _foreach op: one per ~100 tensors).", "",
           "| optimizer | step ms | ops per step | speed vs LibTorch AdamW |", "|---|---:|---:|---|"]
    for r in rows:
        vs = f"{base['step_ms'] / r['step_ms']:.2f}x" if base and r is not base else ""
        out.append(f"| {r['optimizer']} | {r['step_ms']:.2f} | {r['ops_per_step']} | {vs} |")
    return out + [""]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device-name", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--peak-tflops", type=float, default=0.0)
    p.add_argument("--note", default="")
    p.add_argument("inputs", nargs="+")
    a = p.parse_args()
    peak = a.peak_tflops or next((v for k, v in PEAK_BF16_TFLOPS.items() if k in a.device_name), 0.0)
    rows = []
    for path in a.inputs:
        with open(path) as f:
            rows += [json.loads(line) for line in f if line.startswith("{")]
    optim = [r for r in rows if r["impl"] == "optim"]  # rpe-bench-optim: one optimizer step
    rows, runs = median_rows([r for r in rows if r["impl"] != "optim"])
    if not rows:
        print(f"gpu_report: no results in {a.inputs}", file=sys.stderr)
        return 2
    bf16 = {r.get("bf16", True) for r in rows}
    precision = "bf16 autocast" if bf16 == {True} else "fp32" if bf16 == {False} else "bf16 or fp32 (see rows)"
    out = [f"# Training throughput on {a.device_name}", "",
           "Whole BERT MLM training step (forward, loss on 15% masked, backward, AdamW), "
           f"{precision}, dropout 0.1, random packed batches; median step. "
           "rpe = rpe-train (bench/model_bench.cpp), hf = Hugging Face BertForMaskedLM "
           "(bench/hf_bench.py) in the same run on the same shapes. MFU against "
           + (f"{peak:g} TFLOP/s peak dense bf16." if peak else "no known peak (pass --peak-tflops)."),
           ""]
    if runs > 1:
        out += [f"Each row is the run with the median tokens/s of {runs} runs of the pair (inputs given "
                "as several JSON-lines files, alternating rpe and hf, so both see the same drift).", ""]
    if a.note:
        out += [a.note, ""]
    first = rows[0]
    out += [f"Model: hidden {first['hidden']}, {first['layers']} layers, {first['heads']} heads, "
            f"FFN {first['ffn']}, vocab {first['vocab']}.", ""]
    for length in sorted({r["length"] for r in rows}):
        out += [f"## L = {length}", "", "| impl | method | batch | tokens/s | peak memory (MiB) | MFU | vs hf |",
                "|---|---|---:|---:|---:|---:|---|"]
        hf = {r["method"]: r for r in rows if r["impl"] == "hf" and r["length"] == length}
        for r in (r for r in rows if r["length"] == length):
            mfu = r["tokens_per_s"] * flops_per_token(r) / (peak * 1e12) if peak else None
            vs = ""
            if r["impl"] == "rpe":
                ref = hf.get(HF_PEER.get(r["method"], ""))
                if ref:
                    vs = (f"{r['tokens_per_s'] / ref['tokens_per_s']:.2f}x tokens/s, "
                          f"{r['peak_mib'] / ref['peak_mib']:.2f}x memory of {ref['method']}"
                          if ref["peak_mib"] else f"{r['tokens_per_s'] / ref['tokens_per_s']:.2f}x tokens/s of {ref['method']}")
            memory = f"{r['peak_mib']:.0f}" if r["peak_mib"] else "—"  # 0: not measured (CPU)
            out.append(f"| {r['impl']} | {r['method']} | {r['batch']} | {r['tokens_per_s']:.0f} | "
                       f"{memory} | {'' if mfu is None else f'{100 * mfu:.1f}%'} | {vs} |")
        out.append("")
    if optim:
        out += optimizer_section(optim)
    write_atomic(a.out, "\n".join(out))
    print(f"gpu_report: wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
