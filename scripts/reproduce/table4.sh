#!/usr/bin/env bash
# Table 4 of Huang et al. 2020: method 4 on SQuAD 1.1 dev by clipping distance k (one
# pretraining per k), then the k = n/2 model (the paper's k = 256 of n = 512) fine-tuned at
# lengths beyond its pretraining length (the paper's 576/640/704, scaled by n/512).
#   scripts/reproduce/table4.sh --scale tiny [--seeds 1,2]
source "$(dirname "$0")/lib.sh"
rp_parse_args "$@"
rp_need_squad
for k in "${K_LIST[@]}"; do
  rp_pretrain "m4_k$k" m4 "model.attention.max_relative=$k"
  for s in "${SEED_LIST[@]}"; do rp_finetune squad table4 "m4_k$k" "$RUN_DIR" "$s"; done
done
rp_pretrain "m4_k$LONG_K" m4 "model.attention.max_relative=$LONG_K"
for len in "${LONG_LENS[@]}"; do
  for s in "${SEED_LIST[@]}"; do
    rp_finetune squad table4 "m4_k${LONG_K}_ft$len" "$RUN_DIR" "$s" "finetune.max_seq_len=$len"
  done
done
rp_tables table4 4
rp_extra_table table4-scaled --out "$OUT/tables/table4" --results "$OUT/tables/table4/results.jsonl" \
  --ks "${K_LIST[@]}" --long-lens "${LONG_LENS[@]}" --pretrain-len "$PRE_LEN"
