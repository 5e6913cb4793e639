#!/usr/bin/env bash
# Table 2 of Huang et al. 2020: SQuAD 1.1 dev EM/F1 per position method. Pretrains one model
# per method (--methods; by default the paper's six at --scale paper, every method `rpe-train
# methods --names` lists below it, the methods the paper lacks as extra rows), fine-tunes each
# with every seed, renders tables/table2/tables.{md,csv,json} (mean ± std, the paper's numbers
# beside ours) and the cost table (parameters added, tokens/s, peak memory).
#   scripts/reproduce/table2.sh --scale tiny [--methods absolute,m4|paper|all] [--seeds 1,2]
source "$(dirname "$0")/lib.sh"
rp_parse_args "$@"
rp_need_squad
rp_method_list "" 2  # --methods, else the paper's Table 2 methods at --scale paper, all below
runs=()
for m in "${METHOD_LIST[@]}"; do
  rp_pretrain "$m" "$m"
  runs+=("$RUN_DIR")
  for s in "${SEED_LIST[@]}"; do rp_finetune squad table2 "$m" "$RUN_DIR" "$s"; done
done
rp_tables table2 2
rp_extra_table cost --out "$OUT/tables/table2" --runs "${runs[@]}"
