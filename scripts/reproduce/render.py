#!/usr/bin/env python3
"""Renders what `rpe-train tables` does not: the cost table, Table 4 at reduced scale with the
paper's rows matched, Table 5, the length-extrapolation curves and Figures 4 and 5 (PNG).

Inputs are the reproduction's own files: result JSON lines (one metric per line, fields
method/k/pretrain_max_len/finetune_max_len/seed/metric/value, see docs/finetune.md), each
pretraining run's summary.json, metrics.jsonl and train.log, and `rpe-train inspect` output.
Numbers are mean ± sample standard deviation over seeds (n - 1 in the denominator).
"""
import argparse
import csv
import json
import math
import os
import re
import statistics
import sys
from collections import defaultdict

# Huang et al. 2020, Table 4 (method 4, SQuAD 1.1 dev): (k, pretrain len, fine-tune len) -> (EM, F1).
PAPER_TABLE4 = {
    (2, 512, 512): (82.17, 89.19), (4, 512, 512): (82.44, 89.37), (8, 512, 512): (82.64, 89.59),
    (16, 512, 512): (83.42, 90.18), (32, 512, 512): (83.58, 90.30), (64, 512, 512): (83.40, 90.21),
    (128, 512, 512): (83.20, 90.03), (256, 512, 512): (83.59, 90.54), (512, 512, 512): (83.63, 90.53),
    (256, 512, 576): (83.80, 90.71), (256, 512, 640): (83.97, 90.68), (256, 512, 704): (83.44, 90.32),
}
# Table 5 (BERT-large, SQuAD 1.1 dev): fine-tune length -> (EM, F1); "absolute" = the pretrained model.
PAPER_TABLE5_ABSOLUTE = (86.91, 93.15)
PAPER_TABLE5_M4 = {512: (87.51, 93.55), 576: (87.40, 93.48), 640: (87.57, 93.49), 704: (87.16, 93.47)}


def die(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def read_jsonl(path):
    rows = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        die(f"{path}:{n}: not JSON ({e.msg})")
    except FileNotFoundError:
        die(f"{path}: not found")
    return rows


def mean_std(values):
    if not values:
        return None, None
    m = statistics.fmean(values)
    return m, (statistics.stdev(values) if len(values) > 1 else 0.0)


def fmt(m, s, n=None):
    if m is None:
        return "—"
    text = f"{m:.2f} ± {s:.2f}"
    return text + (f" (n={n})" if n is not None else "")


def write_table(out_dir, name, title, header, rows):
    """rows: lists of cells (strings). Writes <name>.md and <name>.csv, prints the Markdown."""
    os.makedirs(out_dir, exist_ok=True)
    md = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    text = "\n".join(md) + "\n"
    with open(os.path.join(out_dir, name + ".md"), "w", encoding="utf-8") as f:
        f.write(text)
    with open(os.path.join(out_dir, name + ".csv"), "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    print(text)


def squad_cells(rows):
    """Groups SQuAD dev rows by run name without the seed suffix -> {'exact': [...], 'f1': [...]}."""
    groups = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r.get("task") not in ("squad", "squad_v1") or r.get("metric") not in ("exact", "f1"):
            continue
        name = re.sub(r"_s\d+$", "", str(r.get("run_id", "")).split("/")[0])  # "<name>_s<seed>/seed<seed>"
        groups[(r.get("method"), r.get("k"), r.get("pretrain_max_len"), r.get("finetune_max_len"), name)][r["metric"]].append(
            float(r["value"]))
    return groups


# ---------------------------------------------------------------------------- cost table
def cost(args):
    rows = []
    for run in args.runs:
        summary_path = os.path.join(run, "summary.json")
        if not os.path.exists(summary_path):
            die(f"{summary_path}: missing (the pretraining run has not finished)")
        with open(summary_path, encoding="utf-8") as f:
            s = json.load(f)
        speeds = [float(r["tokens_per_s"]) for r in read_jsonl(os.path.join(run, "metrics.jsonl"))
                  if "tokens_per_s" in r and r.get("split") != "valid"]
        speeds = speeds[1:] or speeds  # the first window includes start-up
        total_m = pos = None
        log = os.path.join(run, "train.log")
        if os.path.exists(log):
            with open(log, encoding="utf-8", errors="replace") as f:
                for line in f:
                    m = re.search(r"([\d.]+)M parameters, (\d+) in position method", line)
                    if m:
                        total_m, pos = float(m.group(1)), int(m.group(2))
        peak_dev = s.get("peak_device_bytes") or 0
        peak = peak_dev if peak_dev > 0 else (s.get("peak_rss_bytes") or 0)
        rows.append([s.get("method", os.path.basename(run)), os.path.basename(run),
                     "—" if pos is None else f"{pos:,}", "—" if total_m is None else f"{total_m:.2f}M",
                     f"{statistics.median(speeds):,.0f}" if speeds else "—",
                     "—" if peak <= 0 else f"{peak / 2**20:,.0f} MiB ({'GPU' if peak_dev > 0 else 'process RSS'})",
                     s.get("steps", "—"), f"{s.get('wall_s', 0):.0f}", f"{s.get('valid_loss', float('nan')):.3f}"])
    write_table(args.out, "cost", "Cost per method (pretraining runs of this table)",
                ["method", "run", "position parameters", "total parameters", "tokens/s (median)", "peak memory",
                 "steps", "wall s", "held-out MLM loss"], rows)


# ---------------------------------------------------------------------------- Table 4 at any scale
def scaled_table4(args):
    ks = [int(k) for k in args.ks.split()]
    long_lens = [int(x) for x in args.long_lens.split()]
    n = args.pretrain_len
    groups = squad_cells(read_jsonl(args.results))
    rows = []

    def paper_for(k, ft):
        # Ours -> the paper's row: k as is (k = n - 1, unclipped, is the paper's k = 512); the long
        # rows by their ratio to the pretraining length (n * 576/512 -> 576 ...).
        pk = 512 if k >= n - 1 else k
        pft = 512 if ft <= n else round(ft * 512 / n)
        if ft > n:
            pk = 256
        return PAPER_TABLE4.get((pk, 512, pft)), pk, pft

    for (method, k, pre, ft, name), v in sorted(groups.items(), key=lambda kv: (kv[0][3] or 0, kv[0][1] or 0)):
        paper, pk, pft = paper_for(int(k or 0), int(ft or 0))
        em, f1 = mean_std(v["exact"]), mean_std(v["f1"])
        rows.append([name, k, pre, ft, fmt(*em), fmt(*f1), len(v["f1"]), f"k={pk}, {pft}",
                     "—" if not paper else f"{paper[0]:.2f}", "—" if not paper else f"{paper[1]:.2f}"])
    write_table(args.out, "table4_scaled", f"Table 4 (method 4 by k and fine-tuning length), pretraining length {n}, "
                f"k list {ks}, long lengths {long_lens}; paper row matched by k and length ratio",
                ["run", "k", "pretrain len", "fine-tune len", "EM", "F1", "seeds", "paper row", "paper EM", "paper F1"], rows)


# ---------------------------------------------------------------------------- Table 5
def table5(args):
    lens = [int(x) for x in args.lens.split()]
    groups = squad_cells(read_jsonl(args.results))
    rows = []
    for (method, k, pre, ft, name), v in sorted(groups.items(), key=lambda kv: (kv[0][0] != "absolute", kv[0][3] or 0)):
        idx = lens.index(ft) if ft in lens else None
        if method == "absolute":
            paper = PAPER_TABLE5_ABSOLUTE
        else:
            paper = PAPER_TABLE5_M4.get([512, 576, 640, 704][idx]) if idx is not None and idx < 4 else None
        rows.append([name, method, pre, ft, fmt(*mean_std(v["exact"])), fmt(*mean_std(v["f1"])), len(v["f1"]),
                     "—" if not paper else f"{paper[0]:.2f}", "—" if not paper else f"{paper[1]:.2f}"])
    write_table(args.out, "table5", "Table 5: method 4 added to a pretrained absolute model (near drop-in), SQuAD 1.1 dev; "
                "paper: BERT-large at 512/576/640/704",
                ["run", "method", "pretrain len", "fine-tune len", "EM", "F1", "seeds", "paper EM", "paper F1"], rows)


# ---------------------------------------------------------------------------- figures
def plt_module():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def figure4(args):
    plt = plt_module()
    panels = [json.load(open(p, encoding="utf-8")) for p in args.inputs]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 2.6 * len(panels)), squeeze=False)
    for ax, d in zip(axes[:, 0], panels):
        import numpy as np
        w = np.array(d["weights"])  # [2D+1, width]: one row per distance
        im = ax.imshow(w.T, aspect="auto", cmap="RdBu_r", extent=[d["distances"][0] - 0.5, d["distances"][-1] + 0.5, w.shape[1], 0])
        ax.set_title(f"{d['method']} layer {d['layer']} head {d['head']}: position embedding weights")
        ax.set_xlabel("relative distance j - i")
        ax.set_ylabel("dimension")
        fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


def figure5(args):
    plt = plt_module()
    import numpy as np
    panels = [json.load(open(p, encoding="utf-8")) for p in args.inputs]
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 5.4), squeeze=False)
    for ax, d in zip(axes[0], panels):
        a = np.array(d["attention"])  # [T, T], rows = queries
        im = ax.imshow(a, cmap="viridis")
        ax.set_title(f"{d['method']}: layer {d['layer']} attention, mean over heads")
        ax.set_xlabel("key position j")
        ax.set_ylabel("query position i")
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


def extrapolation(args):
    plt = plt_module()
    mlm = [json.load(open(p, encoding="utf-8")) for p in args.mlm]
    groups = squad_cells(read_jsonl(args.results)) if args.results and os.path.exists(args.results) else {}
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    rows = []
    for d in mlm:
        pts = [(r["length"], r["loss"]) for r in d["mlm_loss"] if r["loss"] is not None]
        if pts:
            axes[0].plot(*zip(*pts), marker="o", label=d["method"])
        for r in d["mlm_loss"]:
            rows.append([d["method"], "MLM loss", d["pretrain_max_len"], r["length"],
                         "n/a (" + r.get("why", "") + ")" if r["loss"] is None else f"{r['loss']:.3f}"])
    axes[0].axvline(mlm[0]["pretrain_max_len"] if mlm else 0, color="grey", ls=":")
    axes[0].set_xlabel("evaluation length")
    axes[0].set_ylabel("held-out MLM loss")
    axes[0].set_title("MLM loss beyond the pretraining length (dotted)")
    by_method = defaultdict(list)
    order = {d["method"]: i for i, d in enumerate(mlm)}  # rows in the script's method order, then by length
    for (method, k, pre, ft, name) in sorted(groups, key=lambda g: (order.get(g[0], len(order)), g[0], g[3])):
        v = groups[(method, k, pre, ft, name)]
        m, s = mean_std(v["f1"])
        by_method[method].append((ft, m, s, pre))
        rows.append([method, "SQuAD F1", pre, ft, fmt(m, s, len(v["f1"]))])
    for method, pts in sorted(by_method.items()):
        pts.sort()
        axes[1].errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o", capsize=3,
                         label=method)
    axes[1].set_xlabel("fine-tuning / evaluation length")
    axes[1].set_ylabel("SQuAD 1.1 dev F1")
    axes[1].set_title("SQuAD F1 by fine-tuning length")
    for ax in axes:
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    os.makedirs(args.out, exist_ok=True)
    png = os.path.join(args.out, "extrapolation.png")
    fig.savefig(png, dpi=120)
    write_table(args.out, "extrapolation", "Length extrapolation per method",
                ["method", "measure", "pretrain len", "length", "value"], rows)
    print(f"wrote {png}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    c = sub.add_parser("cost"); c.add_argument("--out", required=True); c.add_argument("--runs", nargs="+", required=True)
    t4 = sub.add_parser("scaled-table4")
    for a in ("--out", "--results", "--ks", "--long-lens"):
        t4.add_argument(a, required=True)
    t4.add_argument("--long-k", type=int, required=True)
    t4.add_argument("--pretrain-len", type=int, required=True)
    t5 = sub.add_parser("table5")
    for a in ("--out", "--results", "--lens"):
        t5.add_argument(a, required=True)
    for name in ("figure4", "figure5"):
        f = sub.add_parser(name); f.add_argument("--out", required=True); f.add_argument("--inputs", nargs="+", required=True)
    e = sub.add_parser("extrapolation")
    e.add_argument("--out", required=True); e.add_argument("--mlm", nargs="+", required=True); e.add_argument("--results")
    args = p.parse_args()
    {"cost": cost, "scaled-table4": scaled_table4, "table5": table5, "figure4": figure4, "figure5": figure5,
     "extrapolation": extrapolation}[args.what](args)


if __name__ == "__main__":
    main()
