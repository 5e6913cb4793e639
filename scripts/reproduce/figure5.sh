#!/usr/bin/env bash
# Figure 5 of Huang et al. 2020: the first layer's attention probabilities averaged over heads
# for the first 50 tokens of a text, one panel per method (default absolute and m4, the Table 2
# pretraining runs). The text: RPE_FIG5_TEXT (a file), else the first lines of the corpus.
# -> <out>/figures/figure5.png (+ the JSON matrices beside it)
#   scripts/reproduce/figure5.sh --scale tiny [--methods absolute,m4]
source "$(dirname "$0")/lib.sh"
rp_parse_args "$@"
rp_need_plot  # before any training: the figure is drawn last
rp_method_list absolute,m4
[[ "$DRY_RUN" == 1 ]] || mkdir -p "$OUT/figures"
text="${RPE_FIG5_TEXT:-$OUT/figures/figure5_text.txt}"
if [[ -z "${RPE_FIG5_TEXT:-}" ]]; then
  [[ -f "$FIRST_CORPUS" ]] || rp_die "figure 5 needs a text: set RPE_FIG5_TEXT or --corpus"
  [[ "$DRY_RUN" == 1 ]] || awk 'NF && n++ < 8' "$FIRST_CORPUS" | tr '\n' ' ' >"$text"  # no head: SIGPIPE under pipefail
fi
inputs=()
for m in "${METHOD_LIST[@]}"; do
  rp_pretrain "$m" "$m"
  f="$OUT/figures/figure5_${m}.json"
  rp_exec "$BIN" inspect "$RUN_DIR" --attention "$f" --attention-layer 0 --text-file "$text" --tokens 50
  inputs+=("$f")
done
rp_plot figure5 --out "$OUT/figures/figure5.png" --inputs "${inputs[@]}"
