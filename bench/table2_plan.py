#!/usr/bin/env python3
"""Sizes the mini Table 2 run of scripts/gpu_table2.sh to a time budget (docs/gpu.md).

Every method pretrains for the same number of steps S (the comparison is at equal steps, as in
the paper), so S is what the budget buys once everything else is paid for:

  S = (budget - spent - sum_m [start + seeds * (finetune_m + start)]) / sum_m step_m

  step_m      seconds per pretraining step of method m, measured just before by rpe-bench-model
              at the run's shape (--bench; JSON lines: method, step_ms, tokens_per_s)
  finetune_m  epochs * ceil(F_train / B) * ft_step_m  +  ceil(epochs) * F_dev * L / (3 * ft_tokens_per_s_m)
              with ft_step_m measured the same way at the fine-tuning batch of B windows
              (--bench-finetune: a small batch runs less efficiently than pretraining's), and a
              dev pass, forward only (~1/3 of a training step's work), at each epoch's end (the
              last one is the final evaluation)
  F_*         SQuAD windows (train: its first --squad-train-examples questions, if given): per
              question 1 + ceil(max(0, c - room) / stride) with c = 1.3 x the context's words
              (WordPiece pieces per word in English), room = L - q - 3
              (on SQuAD 1.1 at L = 128: 194,719 train windows estimated, 191,593 made)
  start       fixed seconds per process: model build, data loading/tokenization, saves, evals

S is capped (--max-steps: the preset's schedule) and must reach --min-steps, else the plan
fails saying how many minutes would do. The pretraining comes first: with --epochs over 1 and S
under the cap, the plan takes 1 epoch instead when that buys at least 1.5 x the steps (and says
so). --methods plans a subset of the measured methods. Writes the plan as JSON (--out: the
methods and epochs it was made for, which a continuing run keeps) and prints it.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from atomic_file import write_atomic  # noqa: E402


def squad_windows(path, length, stride, max_query, limit=0):
    """Number of length-L windows the SQuAD file's first `limit` questions (0: all) become (estimate)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)["data"]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"table2_plan: {path}: {e}")
    total, questions = 0, 0
    for article in data:
        for p in article["paragraphs"]:
            context = 1.3 * len(p["context"].split())
            for qa in p["qas"]:
                if limit and questions == limit:
                    return total
                questions += 1
                q = min(max_query, math.ceil(1.3 * len(qa["question"].split())))
                room = length - q - 3
                total += 1 + math.ceil(max(0.0, context - room) / stride)
    return total


def read_bench(path):
    """{method: row} from rpe-bench-model's JSON lines."""
    rows = {}
    with open(path) as f:
        for line in f:
            if line.startswith("{"):
                r = json.loads(line)
                rows[r["method"]] = r
    if not rows:
        sys.exit(f"table2_plan: {path}: no measurements")
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", required=True, help="rpe-bench-model JSON lines at the pretraining batch")
    p.add_argument("--bench-finetune", required=True, help="the same at the fine-tuning batch")
    p.add_argument("--finetune-batch", type=int, default=32, help="SQuAD windows per fine-tuning step")
    p.add_argument("--squad-train", required=True)
    p.add_argument("--squad-dev", required=True)
    p.add_argument("--squad-train-examples", type=int, default=0,
                   help="fine-tune on the first N train questions only (finetune.max_train_examples; 0 = all)")
    p.add_argument("--budget-s", type=float, required=True, help="seconds for the whole stage")
    p.add_argument("--spent-s", type=float, default=0.0, help="seconds already spent (prepare, bench)")
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--epochs", type=float, default=2.0)
    p.add_argument("--length", type=int, default=128)
    p.add_argument("--stride", type=int, default=64)
    p.add_argument("--max-query", type=int, default=32)
    p.add_argument("--start-s", type=float, default=20.0, help="fixed seconds per process")
    p.add_argument("--max-steps", type=int, default=5000)
    p.add_argument("--min-steps", type=int, default=200)
    p.add_argument("--methods", default="", help="comma-separated: plan these of the measured methods only")
    p.add_argument("--out", required=True)
    a = p.parse_args()

    rows, ft_rows = read_bench(a.bench), read_bench(a.bench_finetune)
    if set(ft_rows) != set(rows):
        sys.exit(f"table2_plan: {a.bench} and {a.bench_finetune} measure different methods")
    if a.methods:
        wanted = a.methods.split(",")
        missing = [m for m in wanted if m not in rows]
        if missing:
            sys.exit(f"table2_plan: --methods: {', '.join(missing)} not measured in {a.bench}")
        rows = {m: rows[m] for m in wanted}
        ft_rows = {m: ft_rows[m] for m in wanted}
    f_train = squad_windows(a.squad_train, a.length, a.stride, a.max_query, a.squad_train_examples)
    f_dev = squad_windows(a.squad_dev, a.length, a.stride, a.max_query)
    per_step = sum(r["step_ms"] / 1000.0 for r in rows.values())

    def size(epochs):
        """The fine-tuning seconds per method, the fixed seconds, and the steps that fit."""
        steps_per_epoch = math.ceil(f_train / a.finetune_batch)
        finetune = {m: epochs * steps_per_epoch * r["step_ms"] / 1000.0
                    + math.ceil(epochs) * f_dev * a.length / (3 * r["tokens_per_s"]) for m, r in ft_rows.items()}
        fixed = sum(a.start_s + a.seeds * (finetune[m] + a.start_s) for m in rows)
        left = a.budget_s - a.spent_s - fixed
        fit = math.floor(left / per_step) if left > 0 else 0
        return {"epochs": epochs, "finetune": finetune, "fixed": fixed, "fit": fit, "steps": min(a.max_steps, fit)}

    # The pretraining comes first: the comparison is of pretrained position methods. Fine-tuning
    # epochs beyond the first are kept unless dropping them buys the pretraining at least half as
    # many steps again (on an H100, 2026-11-28: 2 epochs of SQuAD left 695 of 5,000 steps, 1 epoch all).
    sized = size(a.epochs)
    if a.epochs > 1 and sized["steps"] < a.max_steps:
        one = size(1.0)
        if one["steps"] > sized["steps"] and one["steps"] >= 1.5 * sized["steps"]:
            print(f"table2_plan: {a.epochs:g} epochs of SQuAD leave the pretraining {sized['steps']} of its "
                  f"{a.max_steps} steps, 1 epoch {one['steps']}: planning 1 epoch")
            sized = one
    epochs, finetune, fixed, fit, steps = (sized[k] for k in ("epochs", "finetune", "fixed", "fit", "steps"))
    plan = {
        "steps": steps, "warmup_steps": max(1, steps // 10), "eval_every": max(1, steps // 5),
        "save_every": max(1, steps // 5), "log_every": max(1, steps // 50),
        "budget_s": a.budget_s, "spent_s": round(a.spent_s, 1), "start_s": a.start_s, "seeds": a.seeds,
        "epochs": epochs, "methods": list(rows),
        "squad_windows": {"train": f_train, "dev": f_dev}, "squad_train_examples": a.squad_train_examples,
        "per_method": {m: {"step_ms": r["step_ms"], "tokens_per_s": r["tokens_per_s"],
                           "finetune_step_ms": ft_rows[m]["step_ms"], "finetune_s": round(finetune[m], 1)}
                       for m, r in rows.items()},
        "estimated_s": round(a.spent_s + fixed + steps * per_step, 1),
    }
    print(f"table2_plan: {len(rows)} methods x {steps} steps (fits {fit}, cap {a.max_steps}); "
          f"pretraining {steps * per_step:.0f} s + fine-tuning and starts {fixed:.0f} s "
          f"+ spent {a.spent_s:.0f} s = {plan['estimated_s']:.0f} s of {a.budget_s:.0f} s; "
          f"SQuAD windows {f_train} train, {f_dev} dev")
    if steps < a.min_steps:
        need = (a.spent_s + fixed + a.min_steps * per_step) / 60
        sys.exit(f"table2_plan: the budget buys {steps} steps per method, fewer than {a.min_steps}: "
                 f"give at least {math.ceil(need)} minutes, fewer methods or seeds, or fewer epochs")
    write_atomic(a.out, json.dumps(plan, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
