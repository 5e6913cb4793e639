#!/usr/bin/env bash
# Figure 4 of Huang et al. 2020: heat map of method 4's learned relative position embedding of
# one layer/head for distances -50..50 (rows of the [2k+1, d] table, clipped to k). Uses the
# Table 2 pretraining run <out>/pretrain/m4 (pretrained here if missing). Layers/heads: the
# first and the last layer, head 0 (RPE_FIG4_HEAD to change). -> <out>/figures/figure4.png
#   scripts/reproduce/figure4.sh --scale tiny
source "$(dirname "$0")/lib.sh"
rp_parse_args "$@"
rp_need_plot  # before any training: the figure is drawn last
rp_method_list m4
head="${RPE_FIG4_HEAD:-0}"
[[ "$DRY_RUN" == 1 ]] || mkdir -p "$OUT/figures"
# model.layers of run M: its config.yaml once pretrained, else the config rp_pretrain will train
# with (a dry run prints the commands before the run exists).
layers_of() {
  local sets=() first='$1 == "layers:" && !n++ { print $2 }'  # model's, the first (reads all: no SIGPIPE)
  if [[ -f "$RUN_DIR/config.yaml" ]]; then awk "$first" "$RUN_DIR/config.yaml"; return; fi
  mapfile -t sets < <(rp_sets "${PRE_SETS[@]+"${PRE_SETS[@]}"}" "run.name=$1" "${PRE_EXTRA[@]+"${PRE_EXTRA[@]}"}")
  (cd "$RP_ROOT" && "$BIN" dump-config --config "configs/pretrain/${PRESET_PREFIX}_$1.yaml" "${sets[@]}") | awk "$first"
}
inputs=()
for m in "${METHOD_LIST[@]}"; do
  rp_pretrain "$m" "$m"
  layers=$(layers_of "$m") || rp_die "pretrain $m: cannot read its model.layers (see above)"
  [[ "$layers" =~ ^[1-9][0-9]*$ ]] || rp_die "pretrain $m: no model.layers in its config"
  last=$((layers - 1))
  for layer in 0 "$last"; do
    f="$OUT/figures/figure4_${m}_layer${layer}_head${head}.json"
    rp_exec "$BIN" inspect "$RUN_DIR" --position-weights "$f" --layer "$layer" --head "$head" --max-distance 50
    inputs+=("$f")
  done
done
rp_plot figure4 --out "$OUT/figures/figure4.png" --inputs "${inputs[@]}"
