#!/usr/bin/env bash
# ctest gpu_table2_cpu_smoke: the GPU check's second stage in its CPU form (docs/gpu.md) on a
# slice of the real public data: scripts/pack_data.sh --sample, then scripts/gpu_table2.sh
# --cpu-smoke. Checks the report against the runs it came from (a row per method, the EM/F1
# of each run's results.jsonl, the plan's steps trained), the PNG, that a rerun continues
# (plan kept, every run skipped), and the scripts' refusals. Skips (77) without ../shared/data.
# A call limit (--call-minutes) refuses a method no call can hold, stops cleanly between methods
# (exit 3) when the call's time runs out, and the rerun goes on -- on a "fresh machine" too: from
# the run folder's slim copy that scripts/gpu_call.sh packed (no checkpoints, shards or SQuAD),
# pretraining again a method whose fine-tuning had not finished, and starting over one whose
# pretraining was cut off past its first checkpoint (rpe-train would refuse to resume it).
# Usage: test_gpu_table2.sh REPO BUILD_DIR PYTHON
set -euo pipefail
root=$(cd "$1" && pwd) build=$2 py=$3
data=$root/../shared/data
[[ -f $data/squad/train-v1.1.json ]] || { echo "no ../shared/data beside the repository: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$root"
fail() { echo "FAIL: $*" >&2; exit 1; }

# Refusals: exit code 2 (pack_data.sh, bad arguments) or 1 (gpu_table2.sh, a failed check), one line naming the culprit.
expect() {  # expect CODE TEXT COMMAND...
  local code=$1 text=$2; shift 2
  set +e; "$@" >"$work/out" 2>"$work/err"; local got=$?; set -e
  ((got == code)) || fail "$* exited $got, not $code: $(cat "$work/err")"
  grep -qF -- "$text" "$work/err" || fail "$*: no '$text' in: $(cat "$work/err")"
  (($(wc -l <"$work/err") == 1)) || fail "$*: more than one line on stderr: $(cat "$work/err")"
}
expect 2 "--from DIR is required" scripts/pack_data.sh
expect 2 "$work/squad/train-v1.1.json: not found" scripts/pack_data.sh --from "$work" --out "$work/x"
scripts/pack_data.sh --from "$data" --out "$work/pack" --sample
expect 2 "$work/pack exists" scripts/pack_data.sh --from "$data" --out "$work/pack" --sample
[[ ! -e $work/x && -z $(ls -d "$work"/pack.tmp.* 2>/dev/null) ]] || fail "pack_data.sh left partial output"
expect 1 "$work/none/vocab.txt not found" scripts/gpu_table2.sh --cpu-smoke --data "$work/none" --build-dir "$build" --python "$py"
expect 2 "--device: cuda or cpu, not 'tpu'" scripts/gpu_table2.sh --device tpu --data "$work/pack"
expect 2 "--squad-train-examples: a count (0 = all), not 'many'" scripts/gpu_table2.sh --squad-train-examples many

methods=$("$build/rpe-train" methods --names --paper-table 2 | paste -sd,)  # the default of gpu_table2.sh
# 20 of the slice's SQuAD train questions: the plan and every fine-tuning use just those.
run=("$root/scripts/gpu_table2.sh" --cpu-smoke --data "$work/pack" --build-dir "$build" --python "$py" --out "$work/run"
     --squad-train-examples 20)
# A call through scripts/gpu_call.sh, run folder packed into ARCHIVE: call ARCHIVE ARGS...
call() { local to=$1; shift; (cd "$work" && "$root/scripts/gpu_call.sh" --to "$to" --pack run -- "${run[@]}" "$@"); }
# The machine went cold between calls: only the archive's slim copy of the run folder is left.
cold_start() {
  rm -rf "$work/run"
  tar xzf "$1" -C "$work"
  [[ -f $work/run/plan.json ]] || fail "$1: no plan.json"
  [[ -z $(find "$work/run" -name '*.pt' -o -name shards -o -name squad) ]] || fail "$1 holds checkpoints, shards or SQuAD"
}
# A call of 3 seconds: data and plan are made, then the first method, which needs more than a
# whole call, is refused (exit 1, saying what to shrink) before anything runs.
expect 1 "needs ~" "${run[@]}" --call-minutes 0.05
[[ -f $work/run/plan.json && ! -e $work/run/reproduce/pretrain ]] || fail "--call-minutes: plan missing or a run started"
# A call of exactly what the hungriest method needs (the plan's estimates, as the script
# reckons them): every method fits a call, and the time this call spends before a method tips
# it over, at the first one or a later one -- a clean stop, exit 3, and a rerun continues.
need=$("$py" - "$work/run/plan.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
print(max(round(2 * plan["start_s"] + plan["steps"] * r["step_ms"] / 1000 + r["finetune_s"])
          for r in plan["per_method"].values()) + 0.5)
PY
)
set +e; call "$work/back1.tgz" --call-minutes "$("$py" -c "print($need / 60)")" >"$work/call.log" 2>&1; code=$?; set -e
((code == 3)) || fail "a call of ${need} s exited $code, not 3: $(cat "$work/call.log")"
grep -q "stopping before .*run the same command again to continue" "$work/call.log" || fail "no clean stop: $(cat "$work/call.log")"
# The same command on a fresh machine continues (plan kept) and finishes, method by method
# under a roomy limit.
cold_start "$work/back1.tgz"
"${run[@]}" --call-minutes 30 | tee "$work/continue.log"
grep -q "continuing with the plan" "$work/continue.log" || fail "the call after a cold start made a new plan"
"$py" - "$work/run" $methods <<'PY'
import json, sys
from pathlib import Path
run, methods = Path(sys.argv[1]), sys.argv[2].split(",")
assert len(methods) == 6, methods  # Table 2: absolute, Shaw et al., methods 1-4
report = run / "report"
plan = json.loads((run / "plan.json").read_text())
assert plan["steps"] == 12, plan  # the smoke's cap
assert plan["squad_train_examples"] == 20 and plan["squad_windows"]["train"] >= 20, plan
# The paper's baseline and favourite first (a stage spanning sessions has them early), then the rest.
assert plan["methods"][:2] == ["absolute", "m4"] and sorted(plan["methods"]) == sorted(methods), plan["methods"]
rows = json.loads((report / "tables.json").read_text())
for m in methods:
    summary = json.loads((run / "reproduce/pretrain" / m / "summary.json").read_text())
    assert summary["steps"] == plan["steps"] and summary["nonfinite_skipped"] == 0, (m, summary)
    lines = (run / f"reproduce/finetune/table2/{m}_s1/results.jsonl").read_text().splitlines()
    result = {r["metric"]: r["value"] for r in map(json.loads, lines) if r["split"] == "dev"}
    shown = {r["column"]: r["mean"] for r in rows if r["method"] == m}
    for col, key in (("EM", "exact"), ("F1", "f1")):
        value = result[key]
        assert 0 <= value <= 100 and abs(shown[col] - value) < 1e-9, (m, col, shown, result)
    readme = (report / "README.md").read_text()
    assert f"| {m} |" in readme, m
assert "fine-tuned on the first 20 of them" in readme, readme
assert (report / "losses.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
for name in ("tables.md", "tables.csv", "cost.md", "cost.csv", "cost.json", "plan.json"):
    assert (report / name).stat().st_size > 0, name
print("gpu_table2 report: rows, scores and steps match the runs")
PY
grep -rqsI "SQuAD 1.1: 20 train questions -> " "$work/run" \
  || fail "the fine-tunings did not keep to --squad-train-examples 20"
# A rerun continues: the plan is kept and every finished run is skipped.
call "$work/back2.tgz" >"$work/rerun.log" 2>&1 || { cat "$work/rerun.log"; fail "rerun"; }
grep -q "continuing with the plan" "$work/rerun.log" || fail "rerun made a new plan"
skipped=$(grep -c ": done, skipped" "$work/rerun.log" || true) runs=$((2 * $(tr , '\n' <<<"$methods" | wc -l)))
((skipped == runs)) || fail "rerun skipped $skipped of $runs runs: $(cat "$work/rerun.log")"
# The plan counted 20 questions: a rerun asking for another number is refused, not mis-sized.
expect 1 "plan.json was made with --squad-train-examples 20, not 5" "${run[@]}" --squad-train-examples 5
# A method whose fine-tuning had not finished when its machine went cold: its checkpoints did
# not come back, so it is pretrained again. Another whose pretraining the call's limit cut off
# after a checkpoint (no summary.json, metrics.jsonl past the first checkpoint): it starts over.
# The others stay skipped.
cold_start "$work/back2.tgz"
first=${methods%%,*} rest=${methods#*,}
second=${rest%%,*}
rm -rf "$work/run/reproduce/finetune/table2/${first}_s1" "$work/run/reproduce/finetune/table2/${second}_s1"
rm "$work/run/reproduce/pretrain/$second/summary.json"
"$py" - "$work/run" "$second" <<'PY'
import json, sys
from pathlib import Path
run = Path(sys.argv[1])
logged = max(json.loads(l).get("step", 0) for l in (run / "reproduce/pretrain" / sys.argv[2] / "metrics.jsonl").open())
save_every = json.loads((run / "plan.json").read_text())["save_every"]
assert logged > save_every, (logged, save_every)  # what rpe-train --resume refuses without checkpoints
PY
"${run[@]}" >"$work/refresh.log" 2>&1 || { cat "$work/refresh.log"; fail "the call after losing $first's fine-tuning"; }
grep -q "pretrain $first: finished by an earlier call, but its checkpoints are not here" "$work/refresh.log" \
  || fail "$first was not pretrained again: $(cat "$work/refresh.log")"
grep -q "pretrain $second: interrupted, and no checkpoint of it is here to resume from: starting it over" \
  "$work/refresh.log" || fail "$second was not started over: $(cat "$work/refresh.log")"
for m in "$first" "$second"; do
  [[ -f $work/run/reproduce/pretrain/$m/summary.json ]] || fail "$m was not pretrained again"
  [[ -f $work/run/reproduce/finetune/table2/${m}_s1/seed1/results.json ]] || fail "$m was not fine-tuned again"
done
skipped=$(grep -c ": done, skipped" "$work/refresh.log" || true)
((skipped == runs - 4)) || fail "skipped $skipped of $runs runs after a cold start, not $((runs - 4))"
echo "gpu_table2_cpu_smoke: passed"
