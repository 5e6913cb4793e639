#!/usr/bin/env bash
# rpe-train's SQuAD scoring vs the independent Python scorer (tests/eval/squad_reference.py)
# on noisy predictions for the sample dev sets and, when ../shared/data exists, the real
# ones; plus gold answers as predictions on the real dev-v1.1.json must give EM = F1 = 100.
# Usage: test_squad_parity.sh RPE_TRAIN PYTHON   (run from the repository root)
set -euo pipefail
RPE=$1
PY=$2
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

compare() {  # dataset [na]
  local ds=$1
  "$PY" "$HERE/make_noisy_predictions.py" "$ds" "$TMP/p.json" "$TMP/na.json"
  local args=(--dataset "$ds" --predictions "$TMP/p.json")
  local ref=("$ds" "$TMP/p.json")
  if [[ "${2:-}" == na ]]; then args+=(--na-probs "$TMP/na.json"); ref+=("$TMP/na.json"); fi
  "$RPE" evaluate-squad "${args[@]}" > "$TMP/cpp.json"
  "$PY" "$HERE/squad_reference.py" "${ref[@]}" > "$TMP/py.json"
  "$PY" - "$TMP/cpp.json" "$TMP/py.json" "$ds" <<'PYEOF'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert a.keys() == b.keys(), (sorted(a), sorted(b))
for k in a:
    assert round(a[k], 2) == round(b[k], 2), f"{sys.argv[3]}: {k}: rpe-train {a[k]} vs reference {b[k]}"
print(f"{sys.argv[3]}: agree on {len(a)} values: " + ", ".join(f"{k}={a[k]:.2f}" for k in a))
PYEOF
}

compare data/sample/squad/dev-v1.1.json
compare data/sample/squad2/dev-v2.0.json na
# A no-answer file that lacks questions (the official script: KeyError), or one given for 1.1: refused.
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop(sorted(d)[0]); json.dump(d, open(sys.argv[2], "w"))' \
  "$TMP/na.json" "$TMP/na_part.json"  # the last compare's files: every predicted question had a score
for bad in "data/sample/squad2/dev-v2.0.json:no score for question" "data/sample/squad/dev-v1.1.json:are for SQuAD 2.0"; do
  set +e
  err=$("$RPE" evaluate-squad --dataset "${bad%%:*}" --predictions "$TMP/p.json" --na-probs "$TMP/na_part.json" 2>&1 >/dev/null)
  rc=$?
  set -e
  [[ $rc == 2 && $err == *"${bad#*:}"* ]] || { echo "evaluate-squad --na-probs (${bad%%:*}): exit $rc: $err"; exit 1; }
done
# Questions without a prediction score 0 and are counted on stderr (stdout: the scores alone);
# predictions for none of the file's questions (another file's) are refused.
"$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); d.pop(sorted(d)[0]); json.dump(d, open(sys.argv[2], "w"))' \
  "$TMP/p.json" "$TMP/p_part.json"
"$RPE" evaluate-squad --dataset data/sample/squad2/dev-v2.0.json --predictions "$TMP/p_part.json" \
  > "$TMP/part.json" 2> "$TMP/part.err"
grep -q "^warning: .*p_part.json: [0-9]* of [0-9]* questions have no prediction (the first: .*); each scores 0$" \
  "$TMP/part.err" || { echo "no count of the unanswered question: $(cat "$TMP/part.err")"; exit 1; }
"$PY" -c 'import json,sys; json.load(open(sys.argv[1]))' "$TMP/part.json"
echo '{"elsewhere": "x"}' > "$TMP/other.json"
set +e
err=$("$RPE" evaluate-squad --dataset data/sample/squad/dev-v1.1.json --predictions "$TMP/other.json" 2>&1 >/dev/null)
rc=$?
set -e
[[ $rc == 2 && $err == *"other.json: no prediction for any of the "*" (predictions for another file?)" ]] ||
  { echo "evaluate-squad with another file's predictions: exit $rc: $err"; exit 1; }
DATA=../shared/data
if [[ -f $DATA/squad/dev-v1.1.json ]]; then
  compare $DATA/squad/dev-v1.1.json
  "$PY" - "$DATA/squad/dev-v1.1.json" "$TMP/gold.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
json.dump({qa["id"]: qa["answers"][0]["text"] for a in d["data"] for p in a["paragraphs"] for qa in p["qas"]},
          open(sys.argv[2], "w"))
PYEOF
  out=$("$RPE" evaluate-squad --dataset $DATA/squad/dev-v1.1.json --predictions "$TMP/gold.json")
  echo "real dev-v1.1 with gold answers: $out"
  [[ $out == '{"exact_match":100.0,"f1":100.0}' ]] || { echo "expected EM = F1 = 100"; exit 1; }
fi
if [[ -f $DATA/squad2/dev-v2.0.json ]]; then compare $DATA/squad2/dev-v2.0.json na; fi
echo "squad parity: OK"
