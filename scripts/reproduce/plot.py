#!/usr/bin/env python3
"""Draws the reproduction's figures (PNG, matplotlib): Figures 4 and 5 from `rpe-train inspect`
output, and the length-extrapolation curves from the table `rpe-train tables extrapolation`
wrote (extrapolation.json). Figures only: every table, with its statistics over seeds, is
rendered by `rpe-train tables` (docs/reproduce.md), so nothing here computes a number.
"""
import argparse
import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from atomic_file import save_png  # noqa: E402


def die(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        die(f"{path}: not found")
    except json.JSONDecodeError as e:
        die(f"{path}: not JSON ({e.msg})")


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def figure4(args):
    plt = pyplot()
    import numpy as np
    panels = [load(p) for p in args.inputs]
    fig, axes = plt.subplots(len(panels), 1, figsize=(10, 2.6 * len(panels)), squeeze=False)
    for ax, d in zip(axes[:, 0], panels):
        w = np.array(d["weights"])  # [2D+1, width]: one row per distance
        im = ax.imshow(w.T, aspect="auto", cmap="RdBu_r", extent=[d["distances"][0] - 0.5, d["distances"][-1] + 0.5, w.shape[1], 0])
        ax.set_title(f"{d['method']} layer {d['layer']} head {d['head']}: position embedding weights")
        ax.set_xlabel("relative distance j - i")
        ax.set_ylabel("dimension")
        fig.colorbar(im, ax=ax)
    fig.tight_layout()
    save_png(fig, args.out)
    print(f"wrote {args.out}")


def figure5(args):
    plt = pyplot()
    import numpy as np
    panels = [load(p) for p in args.inputs]
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 5.4), squeeze=False)
    for ax, d in zip(axes[0], panels):
        a = np.array(d["attention"])  # [T, T], rows = queries
        im = ax.imshow(a, cmap="viridis")
        ax.set_title(f"{d['method']}: layer {d['layer']} attention, mean over heads")
        ax.set_xlabel("key position j")
        ax.set_ylabel("query position i")
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    save_png(fig, args.out)
    print(f"wrote {args.out}")


def extrapolation(args):
    """Left: MLM loss by evaluation length (a null value: the method refused the length).
    Right: SQuAD F1 mean ± std over seeds by fine-tuning length. Both from the table's rows."""
    plt = pyplot()
    rows = load(args.table).get("rows")
    if not isinstance(rows, list):
        die(f"{args.table}: no 'rows' (expected the extrapolation.json of rpe-train tables extrapolation)")
    mlm, squad, pretrain_len = defaultdict(list), defaultdict(list), None
    for r in rows:
        if r["measure"] == "MLM loss":
            pretrain_len = pretrain_len or r["pretrain len"]
            if r["value"] is not None:
                mlm[r["method"]].append((r["length"], r["value"]))
        elif r["measure"] == "SQuAD F1" and r["value"] is not None:
            # std is null for one seed (no sample std): no error bar
            squad[r["method"]].append((r["length"], r["value"]["mean"], r["value"]["std"] or 0.0))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.8))
    for method, pts in mlm.items():  # the table's method order
        axes[0].plot(*zip(*pts), marker="o", label=method)
    axes[0].axvline(pretrain_len or 0, color="grey", ls=":")
    axes[0].set_xlabel("evaluation length")
    axes[0].set_ylabel("held-out MLM loss")
    axes[0].set_title("MLM loss beyond the pretraining length (dotted)")
    for method, pts in sorted(squad.items()):
        pts.sort()
        axes[1].errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o", capsize=3,
                         label=method)
    axes[1].set_xlabel("fine-tuning / evaluation length")
    axes[1].set_ylabel("SQuAD 1.1 dev F1")
    axes[1].set_title("SQuAD F1 by fine-tuning length")
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    save_png(fig, args.out)
    print(f"wrote {args.out}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="what", required=True)
    for name in ("figure4", "figure5"):
        f = sub.add_parser(name)
        f.add_argument("--out", required=True)
        f.add_argument("--inputs", nargs="+", required=True)
    e = sub.add_parser("extrapolation")
    e.add_argument("--out", required=True, help="the PNG to write")
    e.add_argument("--table", required=True, help="extrapolation.json from rpe-train tables extrapolation")
    args = p.parse_args()
    {"figure4": figure4, "figure5": figure5, "extrapolation": extrapolation}[args.what](args)


if __name__ == "__main__":
    main()
