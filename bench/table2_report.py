#!/usr/bin/env python3
"""Writes the README.md of bench/results/table2_mini_<device>/ (scripts/gpu_table2.sh):
what ran (device, date, data, the plan that sized it), each pretraining run's losses from its
summary.json, and the SQuAD and cost tables that `rpe-train tables` rendered beside it.
"""
import argparse
import datetime
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from atomic_file import write_atomic  # noqa: E402


def read_json(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        sys.exit(f"table2_report: {path}: {e}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device-name", required=True)
    p.add_argument("--plan", required=True)
    p.add_argument("--tables", required=True, help="tables.md (Table 2)")
    p.add_argument("--cost", required=True, help="cost.md")
    p.add_argument("--manifest", required=True, help="manifest.json of the packed data")
    p.add_argument("--runs", nargs="+", required=True, help="pretraining run folders")
    p.add_argument("--elapsed-s", type=float, required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    plan, manifest = read_json(a.plan), read_json(a.manifest)
    files = manifest["files"]
    corpus = files["corpus.txt.gz"]
    train, dev = files["squad/train-v1.1.json.gz"], files["squad/dev-v1.1.json.gz"]
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    out = [f"# Table 2 at mini scale on real data — {a.device_name}, {today}", "",
           "scripts/gpu_table2.sh (docs/gpu.md): the mini_* presets (4 layers, hidden 256, 4 heads, "
           "length 128, bf16), pretrained with whole-word masking on the packed corpus, then fine-tuned "
           "on SQuAD 1.1 and scored on its dev set with the official EM/F1." + (" **Sample data** (smoke run): "
           "the numbers mean nothing." if manifest.get("sample") else ""), "",
           f"- Corpus: {corpus['documents']} documents, {corpus['lines']} lines: "
           + ", ".join(s["file"] for s in corpus["sources"]) + "; BERT's uncased WordPiece vocabulary.",
           f"- SQuAD 1.1: {train['questions']} training questions ({train['articles']} articles)"
           + (f", fine-tuned on the first {plan['squad_train_examples']} of them (--squad-train-examples)"
              if plan.get("squad_train_examples") else "")
           + f", {dev['questions']} dev questions; {plan['epochs']} epochs, {plan['seeds']} seed(s).",
           f"- Plan (bench/table2_plan.py): {plan['steps']} pretraining steps per method (warmup "
           f"{plan['warmup_steps']}), sized from the step times measured in the same run to a budget of "
           f"{plan['budget_s'] / 60:.0f} min; estimated {plan['estimated_s'] / 60:.1f} min, took "
           f"{a.elapsed_s / 60:.1f} min.", "",
           "| method | step ms (bench) | tokens/s (bench) | first loss | final loss | held-out MLM loss | non-finite steps |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for run in a.runs:
        s = read_json(Path(run) / "summary.json")
        m = plan["per_method"].get(s["method"], {})
        cells = [m.get("step_ms"), m.get("tokens_per_s"), s.get("first_loss"), s.get("final_loss"), s.get("valid_loss")]
        shown = [fmt.format(v) if isinstance(v, (int, float)) else "—"
                 for fmt, v in zip(["{:.1f}", "{:,.0f}", "{:.3f}", "{:.3f}", "{:.3f}"], cells)]
        out.append(f"| {s['method']} | " + " | ".join(shown) + f" | {s.get('nonfinite_skipped', 0)} |")
    plot = (Path(a.out).parent / "losses.png").exists()  # absent where matplotlib is
    out += ["", ("Loss curves: [losses.png](losses.png). " if plot else "No loss plot (matplotlib was missing). ")
            + "Tables as rendered by `rpe-train tables` (also as .csv and .json here):", ""]
    for path in (a.tables, a.cost):
        text = Path(path).read_text().strip().splitlines()
        out += ["#" + line if line.startswith("# ") else line for line in text] + [""]
    write_atomic(a.out, "\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
