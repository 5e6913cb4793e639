#!/usr/bin/env bash
# Table 3 of Huang et al. 2020: GLUE dev (MNLI-m/mm, QQP, SST-2, MRPC) per position method, on
# the same pretraining runs as Table 2 (shared under <out>/pretrain/<method>), every seed.
#   scripts/reproduce/table3.sh --scale tiny [--methods absolute,m4] [--seeds 1,2]
source "$(dirname "$0")/lib.sh"
rp_parse_args "$@"
[[ -n "$GLUE_DIR" ]] || rp_die "Table 3 needs --glue-dir (or RPE_GLUE_DIR)"
rp_method_list "" 3  # --methods, else the paper's Table 3 methods at --scale paper, all below
runs=()
for m in "${METHOD_LIST[@]}"; do
  rp_pretrain "$m" "$m"
  runs+=("$RUN_DIR")
  for task in "${GLUE_TASKS[@]}"; do
    for s in "${SEED_LIST[@]}"; do rp_finetune "glue:$task" table3 "${m}_${task}" "$RUN_DIR" "$s"; done
  done
done
rp_tables table3 3
rp_extra_table cost --out "$OUT/tables/table3" --runs "${runs[@]}"
