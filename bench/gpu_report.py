#!/usr/bin/env python3
"""Writes bench/results/gpu_<device>.md from the JSON lines of rpe-bench-model and hf_bench.py.

MFU = tokens/s x useful training FLOPs per token / the device's peak dense bf16 FLOP/s.
Useful FLOPs per token (training = 3x forward, both implementations counted alike):
  6 * layers * (4 D^2 + 2 D F)      dense layers (Q, K, V, O, FFN)
  12 * layers * L * D               attention scores q k^T and probabilities x V
  6 * 0.15 * (D^2 + D V)            MLM head on the 15% masked tokens
Position-method extras (relative tables, gates) are not counted: they are overhead.
Hugging Face rows with "head": "masked" (hf_bench.py's default) apply HF's MLM head to the
masked tokens only, as rpe-train does; "all" (the stock forward, also rows without "head")
runs it on every token, work the count above leaves out. Our methods are set beside the
masked-head rows, and the targets of issue 14 are checked against them.
Usage: gpu_report.py --device-name NAME --out FILE [--peak-tflops X] [--note TEXT] JSONL...
       gpu_report.py --device-name NAME [--peak-tflops X] --check-peak   (exit 2: peak unknown)
"""
import argparse
import json
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from atomic_file import write_atomic  # noqa: E402

# The Hugging Face position type that computes what one of our methods does: absolute with
# SDPA; relative_key is Shaw et al.'s key term (what `shaw` computes by default), and
# relative_key_query Huang et al.'s method 4.
HF_PEER = {"absolute": "absolute-sdpa", "shaw": "relative_key", "m4": "relative_key_query"}

# Peak dense bf16 TFLOP/s (half the datasheets' sparse figure) by torch's device name less
# "NVIDIA ", matched whole: one family name covers parts of different peaks (H100 SXM 989,
# PCIe 756, NVL 835; A10G is not an A10), and a MIG slice has a share of its GPU's peak. A
# name not listed here needs --peak-tflops rather than a guess that would misstate the MFU.
PEAK_BF16_TFLOPS = (
    (r"H100 80GB HBM3", 989.4),  # the SXM5 part
    (r"H100 PCIe", 756.5),
    (r"H100 NVL", 835.5),
    (r"H200|GH200 \d+GB?( HBM3e?)?", 989.4),
    (r"H200 NVL", 835.5),
    (r"A100-(SXM4|PCIE)-\d+GB|A100 \d+GB PCIe", 312.0),
    (r"L40S", 362.1),
    (r"A10", 125.0),
)


def known_peak(device_name):
    """The peak of a listed device; 0 for a CPU (no MFU is reported); None when unknown."""
    if device_name.lower().startswith("cpu"):
        return 0.0
    name = re.sub(r"^NVIDIA\s+", "", " ".join(device_name.split()))
    return next((v for pattern, v in PEAK_BF16_TFLOPS if re.fullmatch(pattern, name, re.IGNORECASE)), None)


def flops_per_token(r):
    d, f, layers, v, length = r["hidden"], r["ffn"], r["layers"], r["vocab"], r["length"]
    return 6 * layers * (4 * d * d + 2 * d * f) + 12 * layers * length * d + 6 * 0.15 * (d * d + d * v)


STOCK = " (head on all tokens)"  # label suffix of stock Hugging Face rows


def label_heads(rows):
    """HF rows measured with the stock head (or before hf_bench had --head) get their own label."""
    for r in rows:
        if r["impl"] == "hf" and r.get("head", "all") == "all":
            r["method"] += STOCK
    return rows


# Issue 14's targets on one GPU at BERT-base, bf16: (our method, its HF peer, what is compared,
# the bound, True if at least / False if at most).
TARGETS = (("absolute", "absolute-sdpa", "tokens/s", 1.2, True),
           ("absolute", None, "MFU", 0.40, True),
           ("m4", "relative_key_query", "tokens/s", 3.0, True),
           ("m4", "relative_key_query", "peak memory", 0.5, False))


def targets_section(rows, peak):
    """One line per target and length: the measured value and pass / FAIL (missing rows FAIL)."""
    out = ["## Targets (issue 14: one GPU, BERT-base, bf16)", "",
           "| target | L | measured | result |", "|---|---:|---:|---|"]
    for length in sorted({r["length"] for r in rows}):
        by = {(r["impl"], r["method"]): r for r in rows if r["length"] == length}
        for method, peer, what, bound, at_least in TARGETS:
            ours, ref = by.get(("rpe", method)), by.get(("hf", peer)) if peer else None
            sign = ">=" if at_least else "<="
            name = f"{method} {what} {sign} {bound:g}" + (f"x {peer}" if peer else "")
            if what == "MFU":
                name = f"{method} MFU {sign} {100 * bound:g}%"
                value = ours["tokens_per_s"] * flops_per_token(ours) / (peak * 1e12) if ours and peak else None
                shown = "—" if value is None else f"{100 * value:.1f}%"
            elif what == "tokens/s":
                value = ours["tokens_per_s"] / ref["tokens_per_s"] if ours and ref else None
                shown = "—" if value is None else f"{value:.2f}x"
            else:
                measured = ours and ref and ours["peak_mib"] and ref["peak_mib"]  # 0: not measured
                value = ours["peak_mib"] / ref["peak_mib"] if measured else None
                shown = "—" if value is None else f"{value:.2f}x"
            ok = value is not None and (value >= bound if at_least else value <= bound)
            out.append(f"| {name} | {length} | {shown} | {'pass' if ok else 'FAIL'} |")
    return out + [""]


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


# Kernel families by name, first match wins (CUDA kernels as Kineto names them; a CPU
# profile names ATen ops). Attention before GEMM: fused attention kernels are CUTLASS too.
KERNEL_FAMILIES = (
    ("attention (fused)", r"flash|fmha|sdpa|attention"),
    ("matmul (GEMM)", r"gemm|cutlass|xmma|nvjet|cublas|aten::(mm|bmm|addmm|matmul|linear)\b"),
    ("softmax", r"softmax"),
    ("layer norm", r"layer_?norm"),
    ("dropout", r"dropout|bernoulli"),
    ("optimizer", r"adam|lamb(?!da)|multi_tensor|foreach"),  # not ATen's {lambda()#N}
    ("copy / cast", r"memcpy|memset|copy|cast"),
    ("reduction", r"reduce"),
    ("elementwise", r"elementwise|vectorized|unrolled|aten::"),
)


def family(name):
    return next((f for f, pattern in KERNEL_FAMILIES if re.search(pattern, name, re.IGNORECASE)), "other")


def profile_section(rows, top=8):
    """Where a profiled case's step time goes (rpe-bench-model --profile-steps): the device's
    busy time against the wall time, the kernel families' shares, the largest kernels."""
    profiled = [r for r in rows if r.get("profile")]
    if not profiled:
        return []
    out = ["## Where the step's time goes", "",
           "Kineto profile of the steps after the timed ones (bench/profile_steps.h), per step. Busy: the "
           "union of the device's kernels; a busy time well under the wall time means the host does not "
           "launch work fast enough. On a CPU the ops are ATen's with inclusive times (callers hold their "
           "callees), so the shares overlap.", ""]
    for r in profiled:
        p = r["profile"]
        busy = p["busy_ms"]
        out += [f"### {r['impl']} {r['method']}, L = {r['length']} (batch {r['batch']}, {p['steps']} steps)", "",
                f"Wall {p['wall_ms']:.2f} ms, busy {busy:.2f} ms ({100 * busy / max(p['wall_ms'], 1e-9):.0f}%).", "",
                "| kernel family | ms | share of busy | calls |", "|---|---:|---:|---:|"]
        fams = {}
        for op in p["ops"]:
            f = fams.setdefault(family(op["name"]), [0.0, 0.0])
            f[0] += op["ms"]
            f[1] += op["calls"]
        for name, (ms, calls) in sorted(fams.items(), key=lambda kv: -kv[1][0]):
            out.append(f"| {name} | {ms:.2f} | {100 * ms / max(busy, 1e-9):.0f}% | {calls:.0f} |")
        out += ["", "| largest kernels | family | ms | calls |", "|---|---|---:|---:|"]
        for op in p["ops"][:top]:
            name = op["name"].replace("|", "\\|")
            out.append(f"| `{name[:90]}` | {family(op['name'])} | {op['ms']:.2f} | {op['calls']:.0f} |")
        out.append("")
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device-name", required=True)
    p.add_argument("--out")
    p.add_argument("--peak-tflops", type=float, default=None, help="0: report no MFU")
    p.add_argument("--check-peak", action="store_true", help="only check that the peak is known (before a benchmark)")
    p.add_argument("--note", default="")
    p.add_argument("inputs", nargs="*")
    a = p.parse_args()
    peak = a.peak_tflops if a.peak_tflops is not None else known_peak(a.device_name)
    if peak is not None and peak < 0:
        print(f"gpu_report: --peak-tflops must be 0 or more, not {peak:g}", file=sys.stderr)
        return 2
    if peak is None:
        print(f"gpu_report: no known peak dense bf16 TFLOP/s for '{a.device_name}': pass --peak-tflops X "
              "(the datasheet's dense bf16 figure; 0 for no MFU)", file=sys.stderr)
        return 2
    if a.check_peak:
        return 0
    if not a.out or not a.inputs:
        print("gpu_report: --out FILE and the JSON-lines inputs are required", file=sys.stderr)
        return 2
    rows = []
    for path in a.inputs:
        with open(path) as f:
            rows += [json.loads(line) for line in f if line.startswith("{")]
    optim = [r for r in rows if r["impl"] == "optim"]  # rpe-bench-optim: one optimizer step
    failed = [r for r in rows if "error" in r]  # e.g. an rpe-graph case whose capture failed
    rows, runs = median_rows(label_heads([r for r in rows if r["impl"] != "optim" and "error" not in r]))
    if not rows:
        print(f"gpu_report: no results in {a.inputs}", file=sys.stderr)
        return 2
    bf16 = {r.get("bf16", True) for r in rows}
    precision = "bf16 autocast" if bf16 == {True} else "fp32" if bf16 == {False} else "bf16 or fp32 (see rows)"
    out = [f"# Training throughput on {a.device_name}", "",
           "Whole BERT MLM training step (forward, loss on 15% masked, backward, AdamW), "
           f"{precision}, dropout 0.1, random packed batches; median step. "
           "rpe = rpe-train (bench/model_bench.cpp), hf = Hugging Face BertForMaskedLM "
           "(bench/hf_bench.py) in the same run on the same shapes, its MLM head on the masked tokens "
           "as ours (rows marked" + STOCK + ": the stock model, head on every token); rpe-graph = rpe-train's "
           "same step captured as one CUDA graph and replayed (train/cuda_graph.h: what the host's kernel "
           "launches cost the eager step); rpe (relative blocks N) = rpe-train with the relative methods' "
           "skew in N query blocks instead of the default 4 (rpe-bench-model --relative-blocks); "
           "rpe (relative skew path) = rpe-train with the relative methods' [L, L] layout by the skew "
           "path instead of its CUDA kernels (--no-relative-kernel); "
           "rpe (unfused add-norm) = rpe-train with the post-LN add & norm as separate kernels instead of "
           "its fused CUDA kernel (--unfused-add-norm); rpe (recompute attention | layers | bias) = rpe-train "
           "with each layer's attention core, each whole layer, or only the position bias the fused kernel "
           "keeps recomputed in backward "
           "(--activation-checkpointing, train.activation_checkpointing); rpe (clipped k = K) = rpe-train "
           "with the relative methods clipped at distance K instead of 511 (--max-relative, Table 4). "
           "MFU against "
           + (f"{peak:g} TFLOP/s peak dense bf16." if peak else "no peak (a CPU, or --peak-tflops 0): no MFU."),
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
        eager = {r["method"]: r for r in rows if r["impl"] == "rpe" and r["length"] == length}
        for r in (r for r in rows if r["length"] == length):
            mfu = r["tokens_per_s"] * flops_per_token(r) / (peak * 1e12) if peak else None
            vs = ""
            ref = hf.get(HF_PEER.get(r["method"], "")) if r["impl"] != "hf" else None
            if ref:
                vs = (f"{r['tokens_per_s'] / ref['tokens_per_s']:.2f}x tokens/s, "
                      f"{r['peak_mib'] / ref['peak_mib']:.2f}x memory of {ref['method']}"
                      if ref["peak_mib"] else f"{r['tokens_per_s'] / ref['tokens_per_s']:.2f}x tokens/s of {ref['method']}")
            if r["impl"] == "rpe-graph" and r["method"] in eager:
                vs = "; ".join(v for v in (f"{r['tokens_per_s'] / eager[r['method']]['tokens_per_s']:.2f}x "
                                           "tokens/s of rpe eager", vs) if v)
            elif r["impl"].startswith("rpe (") and r["method"] in eager:  # a variant of our step: beside the default
                e = eager[r["method"]]
                own = (f"{r['tokens_per_s'] / e['tokens_per_s']:.2f}x tokens/s"
                       + (f", {r['peak_mib'] / e['peak_mib']:.2f}x memory" if e["peak_mib"] else "") + " of rpe")
                vs = "; ".join(v for v in (own, vs) if v)
            memory = f"{r['peak_mib']:.0f}" if r["peak_mib"] else "—"  # 0: not measured (CPU)
            out.append(f"| {r['impl']} | {r['method']} | {r['batch']} | {r['tokens_per_s']:.0f} | "
                       f"{memory} | {'' if mfu is None else f'{100 * mfu:.1f}%'} | {vs} |")
        out.append("")
    if peak:
        out += targets_section(rows, peak)
    if optim:
        out += optimizer_section(optim)
    out += profile_section(rows)
    if failed:
        out += ["## Cases that failed", ""] + [f"- {r['impl']} {r['method']}, L = {r.get('length', '?')}: "
                                                f"{' '.join(str(r['error']).split())}" for r in failed] + [""]
    write_atomic(a.out, "\n".join(out))
    print(f"gpu_report: wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
