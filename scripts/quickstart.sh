#!/usr/bin/env bash
# The quickstart: install dependencies, build, then pretrain a tiny BERT (2 layers,
# hidden 128, 2 heads, length 128) with Huang et al. method 4 attention on the generated
# sample corpus in data/sample/. Prints a live progress line and, at the end, the run
# folder and the final MLM loss and accuracy. Rerunning replaces the quickstart run.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
./scripts/build.sh
RUN_DIR="${RPE_QUICKSTART_RUN:-runs/quickstart_m4}"
./build/rpe-train pretrain --config configs/pretrain/tiny_m4.yaml --run-dir "$RUN_DIR" --overwrite "$@"
echo
echo "loss curve (metrics.jsonl, every 100 steps):"
.venv/bin/python - "$RUN_DIR/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
# Training rows: not held-out ("split") nor a skipped step's event row (overflow_skip,
# nonfinite_skip: no accuracy). A window whose steps were all skipped logs null: it updated nothing.
train = [r for r in rows if "split" not in r and "event" not in r]
num = lambda r, k: "-" if r.get(k) is None else f"{r[k]:.3f}"
for r in train:
    if r["step"] % 100 == 0 or r is train[0]:
        if r.get("loss") is None:
            print(f"  step {r['step']:5d}  no loss: every step of the window was skipped")
        else:
            print(f"  step {r['step']:5d}  loss {num(r, 'loss')}  mlm accuracy {num(r, 'mlm_accuracy')}")
valid = [r for r in rows if r.get("split") == "valid"]
if valid:
    print(f"  held-out: loss {num(valid[-1], 'loss')}  accuracy {num(valid[-1], 'mlm_accuracy')}")
PY
