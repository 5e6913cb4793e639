#!/usr/bin/env python3
"""Plots the MLM loss curves of one or more runs (their metrics.jsonl) into one PNG.

Training rows (no "split") give the training loss per logged window; rows with
"split": "valid" give the held-out loss. Needs matplotlib: Debian's python3-matplotlib
(`apt-get install python3-matplotlib`, then run with /usr/bin/python3) or pip's.

Usage: python3 scripts/plot_losses.py runs/tiny_absolute runs/tiny_m4 -o losses.png [--valid-only]
"""
import argparse
import json
import math
import sys
from pathlib import Path

from atomic_file import save_png


def read_metrics(run: Path):
    """(train_steps, train_losses, valid_steps, valid_losses) from a run folder or metrics file."""
    path = run / "metrics.jsonl" if run.is_dir() else run
    if not path.exists():
        sys.exit(f"error: {path}: no metrics.jsonl (is this a run folder?)")
    train, valid = ([], []), ([], [])
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            sys.exit(f"error: {path}:{n}: not JSON ({e.msg})")
        if "event" in row or "loss" not in row or row["loss"] is None:
            continue
        loss = float(row["loss"])
        if not math.isfinite(loss):
            continue
        target = valid if row.get("split") == "valid" else train
        target[0].append(int(row["step"]))
        target[1].append(loss)
    return train[0], train[1], valid[0], valid[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path, help="run folders (or metrics.jsonl files)")
    ap.add_argument("-o", "--out", type=Path, default=Path("losses.png"), help="PNG to write")
    ap.add_argument("--valid-only", action="store_true", help="plot only held-out losses")
    ap.add_argument("--title", default="MLM loss")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("error: matplotlib is missing: apt-get install python3-matplotlib (or pip install matplotlib)")

    fig, ax = plt.subplots(figsize=(8, 5))
    for i, run in enumerate(args.runs):
        ts, tl, vs, vl = read_metrics(run)
        name = run.name if run.is_dir() else run.parent.name
        color = f"C{i % 10}"
        if ts and not args.valid_only:
            ax.plot(ts, tl, color=color, alpha=0.8, label=f"{name} (train)")
        if vs:
            ax.plot(vs, vl, color=color, linestyle="--", marker="o", markersize=3, label=f"{name} (held-out)")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("MLM cross-entropy")
    ax.set_title(args.title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_png(fig, args.out)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
