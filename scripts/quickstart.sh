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
rows = [json.loads(l) for l in open(sys.argv[1])]
train = [r for r in rows if "split" not in r]
for r in train:
    if r["step"] % 100 == 0 or r is train[0]:
        print(f"  step {r['step']:5d}  loss {r['loss']:.3f}  mlm accuracy {r['mlm_accuracy']:.3f}")
valid = [r for r in rows if r.get("split") == "valid"]
if valid:
    print(f"  held-out: loss {valid[-1]['loss']:.3f}  accuracy {valid[-1]['mlm_accuracy']:.3f}")
PY
