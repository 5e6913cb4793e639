#!/usr/bin/env bash
# Length extrapolation (not in the paper): per method, the held-out MLM loss at evaluation
# lengths up to twice the pretraining length, and SQuAD 1.1 dev F1 after fine-tuning at lengths
# beyond it. Methods that cannot take a length (the learned absolute table has n rows) get
# "n/a" there instead of a number. Uses the Table 2 pretraining runs.
# Eval text: RPE_EVAL_FILE, else the first --corpus file (at tiny scale the sample corpus, which
# the model was also trained on: the tiny curve shows the mechanics, not generalisation).
# -> <out>/tables/extrapolation/extrapolation.{md,csv,json} (rpe-train tables extrapolation) and
#    extrapolation.png (plot.py, drawn from extrapolation.json)
#   scripts/reproduce/extrapolation.sh --scale tiny [--methods absolute,alibi]
source "$(dirname "$0")/lib.sh"
rp_parse_args "$@"
rp_need_plot  # before any training: the figure is drawn last
rp_need_squad
rp_method_list "" 2  # --methods, else the paper's Table 2 methods at --scale paper, all below
eval_file="${RPE_EVAL_FILE:-$FIRST_CORPUS}"
[[ -f "$eval_file" ]] || rp_die "no evaluation text: set RPE_EVAL_FILE or --corpus"
dir="$OUT/tables/extrapolation"
[[ "$DRY_RUN" == 1 ]] || mkdir -p "$dir"
lens="$(IFS=,; echo "${EXTRAP_MLM_LENS[*]}")"
mlm=()
for m in "${METHOD_LIST[@]}"; do
  rp_pretrain "$m" "$m"
  run="$RUN_DIR"
  f="$dir/mlm_${m}.json"
  # Measured again when the run's model, the evaluation text or the lengths are not those of $f.
  measured="run: $run"$'\n'"eval_file: $eval_file ($(stat -c %s "$eval_file") bytes)"$'\n'"lengths: $lens"
  measured+=$'\n'"checkpoint: $(cat "$run/checkpoints/latest" 2>/dev/null || true)"
  if [[ ! -f "$f" || "$(cat "$f.stamp" 2>/dev/null || true)" != "$(rp_portable "$measured")" ]]; then
    rp_exec "$BIN" inspect "$run" --mlm-loss "$f" --eval-file "$eval_file" --lengths "$lens"
    rp_stamp_write "$f.stamp" "$measured"
  fi
  mlm+=("$f")
  # The model's own limit (a learned absolute table has n rows): longer fine-tuning is left out
  # ("n/a" in the table); any failure of a run that is made stops the script.
  longest=none
  [[ "$DRY_RUN" == 1 ]] || longest="$("$BIN" inspect "$run" --max-length)"
  for len in "${EXTRAP_FT_LENS[@]}"; do
    if [[ "$longest" != none ]] && (( len > longest )); then
      rp_log "extrapolation: $m takes at most $longest positions (its learned absolute table): length $len left out"
      continue
    fi
    for s in "${SEED_LIST[@]}"; do
      rp_finetune squad extrapolation "${m}_ft$len" "$run" "$s" "finetune.max_seq_len=$len"
    done
  done
done
results="$dir/results.jsonl"
[[ "$DRY_RUN" == 1 ]] || find "$OUT/finetune/extrapolation" -name results.jsonl -size +0 -exec cat {} + >"$results" 2>/dev/null || true
rp_extra_table extrapolation --out "$dir" --mlm "${mlm[@]}" --results "$results"
rp_plot extrapolation --out "$dir/extrapolation.png" --table "$dir/extrapolation.json"
