#!/usr/bin/env bash
# Table 5 of Huang et al. 2020, the "near drop-in" recipe: start from a pretrained absolute
# BERT, add method 4 (unclipped, k = n - 1, one table per layer as HF's relative_key_query,
# new tables at zero so the model starts as the loaded function) and fine-tune on SQuAD at the
# pretraining length and beyond (512/576/640/704, scaled by n/512 below paper scale).
# Beyond the pretraining length the absolute table cannot be used (it has n rows), so the m4
# model drops it (add_absolute: false) at every length (rows drop_in_m4_noabs_ft<len>), and the
# rows differ in length only: the paper's recipe, a "drop-in replacement of absolute position
# embedding" (sec. 4.4) whose 576-704 rows no 512-row table could serve. The model that keeps it
# (add_absolute: true) is fine-tuned at the pretraining length as one more row (drop_in_m4_abs_ft<n>).
# Base model: tiny/mini: our own absolute pretraining run (<out>/pretrain/absolute); paper:
# --hf-bert DIR (e.g. bert-large-uncased-whole-word-masking) through `rpe-train import-hf`.
#   scripts/reproduce/table5.sh --scale tiny [--seeds 1,2]
source "$(dirname "$0")/lib.sh"
rp_parse_args "$@"
rp_need_squad
if [[ "$SCALE" == paper ]]; then
  [[ -n "$HF_BERT" ]] || rp_die "Table 5 at paper scale needs --hf-bert DIR (config.json, model.safetensors, vocab.txt)"
  base="$OUT/pretrain/hf_bert/model.pt"
  import_settings="import-hf: $HF_BERT"
  if [[ "$DRY_RUN" != 1 ]]; then
    inputs="$(rp_input_lines "$HF_BERT"/{config.json,model.safetensors,vocab.txt,tokenizer_config.json})"
    import_settings+="${inputs:+$'\n'$inputs}"
  fi
  if [[ -f "$base" ]]; then
    rp_stamp_check "$OUT/pretrain/hf_bert" "$OUT/pretrain/hf_bert.stamp" "import-hf" "$import_settings"
  else
    rp_stamp_write "$OUT/pretrain/hf_bert.stamp" "$import_settings"
    [[ "$DRY_RUN" == 1 ]] || mkdir -p "$OUT/pretrain/hf_bert"
    rp_exec "$BIN" import-hf "$HF_BERT" --out "$base"
  fi
else
  rp_pretrain absolute absolute
  base="$RUN_DIR"
fi
swap() {  # swap NAME ADD_ABSOLUTE: a run folder with m4 added to the base model, stamped as runs are
  local dir="$OUT/pretrain/$1" stamp="$OUT/pretrain/$1.stamp" settings inputs
  local args=(--config scripts/reproduce/configs/swap_m4.yaml --set "model.attention.add_absolute=$2")
  # The swap's config resolved over the base model, and the base checkpoint by content: a redone
  # base run at the same path makes the swap's folder one of other settings, not a stale reuse.
  settings="$(rp_settings "${args[@]}" --init "$base")"
  inputs="$(rp_inputs "${args[@]}" --init "$base")"
  settings+="${inputs:+$'\n'$inputs}"
  if [[ -f "$dir/checkpoints/latest" ]]; then
    rp_stamp_check "$dir" "$stamp" "swap $1" "$settings"
    rp_log "swap $1: done, skipped"; return 0
  fi
  [[ "$DRY_RUN" == 1 ]] || rm -rf "$dir"  # a swap cut off midway: redone whole
  rp_stamp_write "$stamp" "$settings"
  rp_exec "$BIN" swap-method "$base" "${args[@]}" --run-dir "$dir"
}
swap drop_in_m4 true
swap drop_in_m4_noabs false
ft_sets=("finetune.epochs=$T5_EPOCHS" "train.lr=$T5_LR")
for s in "${SEED_LIST[@]}"; do
  rp_finetune squad table5 "absolute_ft${T5_LENS[0]}" "$base" "$s" "${ft_sets[@]}" "finetune.max_seq_len=${T5_LENS[0]}"
  rp_finetune squad table5 "drop_in_m4_abs_ft${T5_LENS[0]}" "$OUT/pretrain/drop_in_m4" "$s" "${ft_sets[@]}" \
    "finetune.max_seq_len=${T5_LENS[0]}"
done
for len in "${T5_LENS[@]}"; do
  for s in "${SEED_LIST[@]}"; do
    rp_finetune squad table5 "drop_in_m4_noabs_ft$len" "$OUT/pretrain/drop_in_m4_noabs" "$s" "${ft_sets[@]}" \
      "finetune.max_seq_len=$len"
  done
done
rp_collect table5
rp_extra_table table5 --out "$OUT/tables/table5" --results "$OUT/tables/table5/results.jsonl" --lens "${T5_LENS[@]}"
