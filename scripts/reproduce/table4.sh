#!/usr/bin/env bash
# Table 4 of Huang et al. 2020: method 4 on SQuAD 1.1 dev by clipping distance k (one
# pretraining per k), then the k = n/2 model (the paper's k = 256 of n = 512) fine-tuned at
# lengths beyond its pretraining length (the paper's 576/640/704, scaled by n/512).
# The unclipped k = n - 1 (the paper's "512") is Table 2's m4 model: <out>/pretrain/m4.
#   scripts/reproduce/table4.sh --scale tiny [--seeds 1,2]
source "$(dirname "$0")/lib.sh"
rp_parse_args "$@"
rp_need_squad
# t4_pretrain K: RUN_DIR, m4 pretrained with clipping distance K; FT_K, what its fine-tuning adds.
# K = n - 1 is the model Table 2 pretrains as pretrain/m4 (max_relative 0 means n - 1; the
# presets' max_position is n): that run is reused, or pretrained here under that name, rather
# than pretrained again as m4_k<n-1> (at paper scale one more multi-day BERT-base of the same
# config). Its fine-tuning states k (max_relative = n - 1: the same table, the same function), as
# an m4_k<n-1> run's config did; its result lines record k = n - 1 either way (a clipped method's
# lines carry its effective k), the row the tables give the paper's "k = 512".
t4_pretrain() {
  FT_K=()
  if (( $1 != PRE_LEN - 1 )); then rp_pretrain "m4_k$1" m4 "model.attention.max_relative=$1"; return; fi
  [[ -d "$OUT/pretrain/m4_k$1" ]] &&
    rp_log "table4: $OUT/pretrain/m4_k$1 is no longer used (the same model as pretrain/m4): remove it to free its space"
  rp_pretrain m4 m4
  FT_K=("model.attention.max_relative=$1")
}
for k in "${K_LIST[@]}"; do
  t4_pretrain "$k"
  for s in "${SEED_LIST[@]}"; do rp_finetune squad table4 "m4_k$k" "$RUN_DIR" "$s" "${FT_K[@]+"${FT_K[@]}"}"; done
done
t4_pretrain "$LONG_K"
for len in "${LONG_LENS[@]}"; do
  for s in "${SEED_LIST[@]}"; do
    rp_finetune squad table4 "m4_k${LONG_K}_ft$len" "$RUN_DIR" "$s" "${FT_K[@]+"${FT_K[@]}"}" "finetune.max_seq_len=$len"
  done
done
rp_tables table4 4
rp_extra_table table4-scaled --out "$OUT/tables/table4" --results "$OUT/tables/table4/results.jsonl" \
  --ks "${K_LIST[@]}" --long-lens "${LONG_LENS[@]}" --pretrain-len "$PRE_LEN"
