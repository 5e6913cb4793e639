# Shared library of the reproduction scripts (sourced, not run): argument parsing, the
# per-scale settings, and restartable pretraining / fine-tuning steps.
#
# Layout under --out (default runs/reproduce/<scale>, git-ignored):
#   pretrain/<name>/                 one pretraining run (config.yaml, metrics.jsonl, summary.json, checkpoints/)
#   finetune/<exp>/<name>_s<seed>/   one fine-tuning run per seed (config.yaml, seed<N>/results.json, results.jsonl)
#   tables/<exp>/                    tables.{md,csv,json} (rpe-train tables), the experiment's other
#                                    tables (rpe-train tables <name>: .md/.csv/.json) and plots
#   pretrain/<name>.stamp, finetune/<exp>/<name>_s<seed>.stamp
#                                    the settings the run beside it was asked for (rpe-train
#                                    dump-config --flat: the resolved config, one key a line)
#   shards/<prefix>/                 with --corpus at mini/paper scale: its shards (prepare-data)
#   .lock                            held (flock) while a script works in --out: one at a time
# Restart rules: a pretraining run with summary.json is done (skipped); one without is continued
# with --resume from its newest valid checkpoint. A fine-tuning run with seed<N>/results.json is
# done (continued with `finetune --resume` only to put back result lines a kill kept from its
# results.jsonl); an unfinished one is continued with `finetune --resume` (from the checkpoint its stop
# wrote; redone from its start when it has none, e.g. after a kill). A run is reused (skipped or resumed) only for the settings in its
# stamp: other settings stop the script naming the first key that differs (exit 2), so a table
# never mixes runs of two configs; remove the run folder or pass another --out to make it anew.
set -euo pipefail

RP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SCALE=tiny
OUT=""
METHODS=""
SEEDS=""
BIN="${RPE_TRAIN:-$RP_ROOT/build/rpe-train}"
PY="${RPE_PYTHON:-$RP_ROOT/.venv/bin/python}"
CORPUS="${RPE_CORPUS:-}"        # comma-separated text files (one sentence per line, blank line between documents)
VOCAB="${RPE_VOCAB:-}"          # WordPiece vocab.txt (paper scale)
SQUAD_DIR="${RPE_SQUAD_DIR:-}"  # folder with train-v1.1.json and dev-v1.1.json
GLUE_DIR="${RPE_GLUE_DIR:-}"    # GLUE folder (MNLI/, QQP/, SST-2/, MRPC/ ...)
HF_BERT="${RPE_HF_BERT:-}"      # Hugging Face BERT folder for Table 5 at paper scale
LAUNCHER="${RPE_LAUNCH:-}"       # prefix of every pretrain/finetune command (torchrun --no-python ...)
FT_LAUNCHER="${RPE_FINETUNE_LAUNCH:-}"  # fine-tuning's own prefix ("none": one process), else LAUNCHER
PRE_EXTRA=()                    # --pretrain-set a.b=c (and --set): every pretraining run
FT_EXTRA=()                     # --finetune-set a.b=c (and --set): every fine-tuning run
DRY_RUN=0

rp_usage() {
  cat <<EOF
usage: $0 [--scale tiny|mini|paper] [--out DIR] [--methods a,b,...] [--seeds 1,2,3]
          [--corpus a.txt,b.txt] [--vocab vocab.txt] [--squad-dir DIR] [--glue-dir DIR]
          [--hf-bert DIR] [--set|--pretrain-set|--finetune-set key=value ...]
          [--launcher CMD] [--finetune-launcher CMD|none] [--rpe-train BIN] [--python PY] [--dry-run]
tiny reads the project's data/sample; mini and paper need --squad-dir/--glue-dir (and a corpus;
paper also --vocab). --methods: names, or 'paper' (the paper's rows), 'all' (every registered
method); default: the paper's at --scale paper, all below. --corpus: its shards go to <out>/shards.
--launcher: words put before every pretrain and finetune command (no other), for many GPUs, e.g.
  --launcher "torchrun --no-python --nproc-per-node=8"   (more: docs/reproduce.md, "Paper scale")
--finetune-launcher: fine-tuning's own (default: --launcher; none: one process).
Environment: RPE_CORPUS RPE_VOCAB RPE_SQUAD_DIR RPE_GLUE_DIR RPE_HF_BERT RPE_LAUNCH RPE_FINETUNE_LAUNCH.
EOF
}

rp_die() { echo "error: $*" >&2; exit 2; }
rp_log() { echo "[reproduce $(date -u +%H:%M:%S)] $*" >&2; }

# rp_abs PATH: PATH made absolute against the directory the script was started in (the steps
# run from the repository root). Empty stays empty.
rp_abs() {
  if [[ -z "$1" || "$1" == /* ]]; then printf '%s' "$1"; else printf '%s/%s' "$RP_CWD" "$1"; fi
}

rp_parse_args() {
  RP_CWD="$PWD"
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --scale|--out|--methods|--seeds|--corpus|--vocab|--squad-dir|--glue-dir|--hf-bert|--set|--pretrain-set|\
      --finetune-set|--rpe-train|--python|--launcher|--finetune-launcher)
        [[ $# -ge 2 && -n "$2" ]] || rp_die "$1 needs a value (see --help)" ;;
    esac
    case "$1" in
      --scale) SCALE="$2"; shift 2 ;;
      --out) OUT="$2"; shift 2 ;;
      --methods) METHODS="$2"; shift 2 ;;
      --seeds) SEEDS="$2"; shift 2 ;;
      --corpus) CORPUS="$2"; shift 2 ;;
      --vocab) VOCAB="$2"; shift 2 ;;
      --squad-dir) SQUAD_DIR="$2"; shift 2 ;;
      --glue-dir) GLUE_DIR="$2"; shift 2 ;;
      --hf-bert) HF_BERT="$2"; shift 2 ;;
      --set) PRE_EXTRA+=("$2"); FT_EXTRA+=("$2"); shift 2 ;;
      --pretrain-set) PRE_EXTRA+=("$2"); shift 2 ;;
      --finetune-set) FT_EXTRA+=("$2"); shift 2 ;;
      --rpe-train) BIN="$2"; shift 2 ;;
      --python) PY="$2"; shift 2 ;;
      --launcher) LAUNCHER="$2"; shift 2 ;;
      --finetune-launcher) FT_LAUNCHER="$2"; shift 2 ;;
      --dry-run) DRY_RUN=1; shift ;;
      -h|--help) rp_usage; exit 0 ;;
      *) rp_die "unknown argument '$1' (see --help)" ;;
    esac
  done
  [[ "$SCALE" =~ ^[a-z0-9_]+$ && -f "$RP_ROOT/configs/reproduce/$SCALE.yaml" ]] ||
    rp_die "--scale must be tiny, mini or paper, got '$SCALE'"
  # Paths as given, whatever the directory the steps run in. A bare command name (no slash) for
  # --rpe-train / --python is looked up on PATH.
  [[ "$BIN" == */* ]] && BIN="$(rp_abs "$BIN")"
  [[ "$PY" == */* ]] && PY="$(rp_abs "$PY")"
  VOCAB="$(rp_abs "$VOCAB")"; SQUAD_DIR="$(rp_abs "$SQUAD_DIR")"; GLUE_DIR="$(rp_abs "$GLUE_DIR")"
  HF_BERT="$(rp_abs "$HF_BERT")"
  [[ -n "${RPE_EVAL_FILE:-}" ]] && RPE_EVAL_FILE="$(rp_abs "$RPE_EVAL_FILE")"
  [[ -n "${RPE_FIG5_TEXT:-}" ]] && RPE_FIG5_TEXT="$(rp_abs "$RPE_FIG5_TEXT")"
  CORPUS_FILES=()
  if [[ -n "$CORPUS" ]]; then
    local f files=()
    IFS=, read -r -a files <<<"$CORPUS"
    for f in "${files[@]}"; do CORPUS_FILES+=("$(rp_abs "$f")"); done
  fi
  BIN_FOUND="$(command -v "$BIN" || true)"
  [[ -n "$BIN_FOUND" && -x "$BIN_FOUND" ]] || rp_die "rpe-train binary '$BIN' not found (build it, or pass --rpe-train)"
  BIN="$BIN_FOUND"
  rp_launcher --launcher "$LAUNCHER"; PRE_LAUNCH=("${RP_WORDS[@]+"${RP_WORDS[@]}"}")
  if [[ -n "$FT_LAUNCHER" ]]; then rp_launcher --finetune-launcher "$FT_LAUNCHER"; fi
  FT_LAUNCH=("${RP_WORDS[@]+"${RP_WORDS[@]}"}")
  rp_check_seeds
  OUT="$(rp_abs "${OUT:-$RP_ROOT/runs/reproduce/$SCALE}")"
  if [[ "$DRY_RUN" != 1 ]]; then mkdir -p "$OUT" && OUT="$(cd "$OUT" && pwd)" && rp_lock_out; fi
  rp_scale_settings
}

# rp_launcher FLAG TEXT: RP_WORDS, the launcher TEXT split at blanks (no quoting; "none" or
# empty: no launcher), checked here rather than after a pretraining's data is prepared: its
# program must be found, and torchrun needs --no-python (rpe-train is a program; without it
# torchrun would run the binary as a Python script).
rp_launcher() {
  RP_WORDS=()
  [[ -z "$2" || "$2" == none ]] && return 0
  read -r -a RP_WORDS <<<"$2"
  [[ "${RP_WORDS[0]}" == */* ]] && RP_WORDS[0]="$(rp_abs "${RP_WORDS[0]}")"
  command -v "${RP_WORDS[0]}" >/dev/null || rp_die "$1: program '${RP_WORDS[0]}' not found"
  local w torch=0 nopy=0
  for w in "${RP_WORDS[@]}"; do
    case "$w" in */torchrun|torchrun|torch.distributed.run) torch=1 ;; --no-python|--no_python) nopy=1 ;; esac
  done
  [[ $torch == 0 || $nopy == 1 ]] || rp_die "$1: torchrun needs --no-python (rpe-train is a program, not a Python script)"
}

# rp_lock_out: one script at a time in OUT (two would train the same run folders at once). The
# lock lives as long as this shell (and the rpe-train processes it starts, which inherit it).
rp_lock_out() {
  exec {RP_LOCK_FD}>>"$OUT/.lock"
  flock -n "$RP_LOCK_FD" ||
    rp_die "$OUT is in use by another reproduction script (it holds $OUT/.lock); wait for it or pass another --out"
}

source "$(dirname "${BASH_SOURCE[0]}")/stamps.sh"  # rp_portable, rp_stamp_check/write, rp_inputs, rp_settings

# SEEDS: comma-separated non-negative integers, written as rpe-train writes them (seed<N>/ for
# "01" is seed1/), each once: the done-checks look for the folders those names give.
rp_check_seeds() {
  [[ -z "$SEEDS" ]] && return 0
  local s out=() seen=" "
  IFS=, read -r -a list <<<"$SEEDS"
  for s in "${list[@]}"; do
    s="${s// /}"
    [[ "$s" =~ ^[0-9]{1,9}$ ]] || rp_die "--seeds: '$s' is not a non-negative integer (e.g. --seeds 1,2,3)"
    s=$((10#$s))
    [[ "$seen" == *" $s "* ]] && continue
    seen+="$s "
    out+=("$s")
  done
  [[ ${#out[@]} -gt 0 ]] || rp_die "--seeds: no seed given"
  SEEDS="$(IFS=,; echo "${out[*]}")"
}

# Per-scale settings, from configs/reproduce/<scale>.yaml (read through `rpe-train dump-config
# --shell`, which prints its keys as bash assignments): PRESET_PREFIX, PRE_LEN, SQUAD_CONFIG,
# GLUE_CONFIG, SQUAD_SETS, GLUE_SETS, SEEDS (default), K_LIST, LONG_K, LONG_LENS, T5_*, EXTRAP_*,
# GLUE_TASKS, SAMPLE_DATA. What each scale requires of the command line stays here.
rp_scale_settings() {
  PRE_SETS=()
  local settings="$RP_ROOT/configs/reproduce/$SCALE.yaml" seeds_given="$SEEDS" vars
  # stdout is shell code to eval: stderr (the one-line error) is kept apart, asked for on failure
  vars="$("$BIN" dump-config --shell --config "$settings" 2>/dev/null)" ||
    rp_die "$("$BIN" dump-config --shell --config "$settings" 2>&1 >/dev/null | sed 's/^error: //')"
  eval "$vars"
  SEEDS="${seeds_given:-$SEEDS}"
  if [[ "$SAMPLE_DATA" == true ]]; then
    [[ -z "$SQUAD_DIR" ]] && SQUAD_DIR="$RP_ROOT/data/sample/squad"
    [[ -z "$GLUE_DIR" ]] && GLUE_DIR="$RP_ROOT/data/sample/glue"
    [[ -z "$CORPUS" ]] && CORPUS="$RP_ROOT/data/sample/corpus.txt"
  fi
  if [[ "$SAMPLE_DATA" == true && ${#CORPUS_FILES[@]} -eq 0 ]]; then CORPUS_FILES=("$CORPUS"); fi
  case "$SCALE" in
    paper)
      [[ -n "$CORPUS" ]] || rp_die "--scale paper needs --corpus (BooksCorpus + Wikipedia text) or RPE_CORPUS"
      [[ -n "$VOCAB" ]] && PRE_SETS+=(data.tokenizer_model="$VOCAB")
      ;;
  esac
  # SQuAD is checked by the scripts that fine-tune on it (rp_need_squad), not by GLUE's or the figures'.
  [[ -n "$GLUE_DIR" ]] && GLUE_SETS+=(finetune.glue_dir="$GLUE_DIR")
  if [[ ${#CORPUS_FILES[@]} -gt 0 ]]; then
    local f list=""
    for f in "${CORPUS_FILES[@]}"; do
      [[ -f "$f" ]] || rp_die "--corpus: $f not found"
      case "$f" in *[[\]\"\']*) rp_die "--corpus: '$f': brackets and quotes in a corpus path are not supported" ;; esac
      list+="${list:+, }\"$f\""
    done
    PRE_SETS+=("data.train_files=[${list}]")
    # The presets name one shared shard folder after their default corpus (data/shards/
    # mini_wikitext103_uncased): another --corpus, or another --out, would rebuild it over the
    # shards a run here trains from. This corpus's shards are this --out's own (a later
    # --pretrain-set data.shards=... still wins). Stamps leave data.shards out (rp_stamp_check).
    [[ "$PRESET_PREFIX" != tiny ]] && PRE_SETS+=("data.shards=$OUT/shards/$PRESET_PREFIX")
  fi
  FIRST_CORPUS="${CORPUS_FILES[0]:-}"
  IFS=, read -r -a SEED_LIST <<<"$SEEDS"
}

# rp_need_squad: SQuAD 1.1's train and dev files in SQUAD_DIR, passed to every SQuAD fine-tuning.
rp_need_squad() {
  [[ -n "$SQUAD_DIR" ]] || rp_die "--scale $SCALE needs --squad-dir (train-v1.1.json, dev-v1.1.json) or RPE_SQUAD_DIR"
  [[ -f "$SQUAD_DIR/train-v1.1.json" && -f "$SQUAD_DIR/dev-v1.1.json" ]] ||
    rp_die "--squad-dir $SQUAD_DIR: train-v1.1.json / dev-v1.1.json not found"
  SQUAD_SETS+=(finetune.train_file="$SQUAD_DIR/train-v1.1.json" finetune.dev_file="$SQUAD_DIR/dev-v1.1.json")
}

# rp_method_list [DEFAULT] [PAPER_TABLE]: METHOD_LIST from --methods, else DEFAULT (comma-
# separated), else the paper's methods at --scale paper and every registered method below it.
# 'paper' stands for the paper's rows (`rpe-train methods --names --paper-table PAPER_TABLE`,
# default 2), 'all' for every method (the registry's order). A paper-scale pretraining is days
# on a cluster: the 6 methods the paper lacks are opt-in there (--methods all). Names are the
# registry's: aliases such as method4 become m4, a repeat runs once, and an unknown name stops
# here (exit 2).
rp_method_list() {
  local list="${METHODS:-${1:-}}" table="${2:-2}" words=() names=() w out seen=" "
  if [[ -z "$list" ]]; then if [[ "$SCALE" == paper ]]; then list=paper; else list=all; fi; fi
  IFS=, read -r -a words <<<"$list"
  for w in "${words[@]}"; do
    case "$w" in
      all) mapfile -t -O "${#names[@]}" names < <("$BIN" methods --names) ;;
      paper) mapfile -t -O "${#names[@]}" names < <("$BIN" methods --names --paper-table "$table") ;;
      *) names+=("$w") ;;
    esac
  done
  out="$("$BIN" methods --names "${names[@]+"${names[@]}"}" 2>/dev/null)" ||
    rp_die "--methods $list: $("$BIN" methods --names "${names[@]+"${names[@]}"}" 2>&1 >/dev/null | sed 's/^error: //')"
  METHOD_LIST=()
  while IFS= read -r w; do
    [[ "$seen" == *" $w "* ]] || METHOD_LIST+=("$w")
    seen+="$w "
  done <<<"$out"
}

rp_sets() {  # prints --set KEY=VALUE for each argument (one word a line, for mapfile)
  local s
  for s in "$@"; do printf -- '--set\n%s\n' "$s"; done
}

rp_exec() {  # runs (or with --dry-run prints) a command, from the repository root
  rp_log "$*"
  [[ "$DRY_RUN" == 1 ]] && return 0
  (cd "$RP_ROOT" && "$@")
}

# rp_pretrain NAME METHOD [KEY=VALUE ...]: pretrains the preset <prefix>_<METHOD> (composed from
# configs/pretrain/<prefix>.yaml and the method, configs/pretrain/README.md) into
# $OUT/pretrain/NAME; skipped when finished, resumed when interrupted. Sets RUN_DIR.
rp_pretrain() {
  local name="$1" method="$2"; shift 2
  local preset="configs/pretrain/${PRESET_PREFIX}_${method}.yaml"
  [[ -f "$RP_ROOT/configs/pretrain/$PRESET_PREFIX.yaml" ]] || rp_die "no scale file configs/pretrain/$PRESET_PREFIX.yaml"
  RUN_DIR="$OUT/pretrain/$name"
  local sets=() settings inputs stamp="$OUT/pretrain/$name.stamp"
  mapfile -t sets < <(rp_sets "${PRE_SETS[@]+"${PRE_SETS[@]}"}" "run.name=$name" "$@" "${PRE_EXTRA[@]+"${PRE_EXTRA[@]}"}")
  settings="$(rp_settings --config "$preset" "${sets[@]}")"
  inputs="$(rp_inputs --config "$preset" "${sets[@]}")"
  settings+="${inputs:+$'\n'$inputs}"
  if [[ -f "$RUN_DIR/summary.json" ]]; then
    rp_stamp_check "$RUN_DIR" "$stamp" "pretrain $name" "$settings"
    rp_log "pretrain $name: done, skipped"; return 0
  fi
  local mode=()
  if [[ -d "$RUN_DIR" && -n "$(ls -A "$RUN_DIR" 2>/dev/null)" ]]; then
    rp_stamp_check "$RUN_DIR" "$stamp" "pretrain $name" "$settings"
    mode=(--resume); rp_log "pretrain $name: resuming"
  else
    rp_stamp_write "$stamp" "$settings"
  fi
  # mini/paper presets train from shards (data.shards), prepared once for every method: a no-op when up to date.
  if [[ "$PRESET_PREFIX" != tiny ]]; then rp_exec "$BIN" prepare-data --config "$preset" "${sets[@]}"; fi
  # Only the training itself goes through the launcher (one process per GPU); prepare-data above
  # and the scripts' other steps (dump-config, inspect, tables) are single-process commands.
  rp_exec "${PRE_LAUNCH[@]+"${PRE_LAUNCH[@]}"}" "$BIN" pretrain --config "$preset" --run-dir "$RUN_DIR" \
    "${mode[@]+"${mode[@]}"}" "${sets[@]}"
}

# rp_finetune KIND EXP NAME INIT SEED [KEY=VALUE ...]: one fine-tuning seed into
# $OUT/finetune/EXP/NAME_s<SEED> (KIND: squad or glue:<task>). Skipped when finished.
rp_finetune() {
  local kind="$1" exp="$2" name="$3" init="$4" seed="$5"; shift 5
  local dir="$OUT/finetune/$exp/${name}_s${seed}"
  local sets=() cmd=() config settings inputs stamp="$dir.stamp"
  if [[ "$kind" == squad ]]; then
    mapfile -t sets < <(rp_sets "${SQUAD_SETS[@]}" "finetune.results_file=$dir/results.jsonl" "run.name=${name}_s$seed" "$@" "${FT_EXTRA[@]+"${FT_EXTRA[@]}"}")
    config="$SQUAD_CONFIG"; cmd=(finetune squad --config "$config")
  else
    mapfile -t sets < <(rp_sets "${GLUE_SETS[@]+"${GLUE_SETS[@]}"}" "finetune.results_file=$dir/results.jsonl" "run.name=${name}_s$seed" "$@" "${FT_EXTRA[@]+"${FT_EXTRA[@]}"}")
    config="$GLUE_CONFIG"; cmd=(finetune glue --task "${kind#glue:}" --config "$config")
  fi
  # The start model's config is part of the settings (--init resolves over it), and so is its path.
  settings="$(rp_settings --config "$config" --init "$init" "${sets[@]}")"$'\n'"init: $init"$'\n'"task: ${kind}"
  inputs="$(rp_inputs --config "$config" --init "$init" "${sets[@]}" --set "finetune.task=${kind#glue:}")"
  settings+="${inputs:+$'\n'$inputs}"
  local mode=() rows lines
  if [[ -f "$dir/seed${seed}/results.json" ]]; then
    rp_stamp_check "$dir" "$stamp" "finetune $exp/${name}_s$seed" "$settings"
    # Done, unless a kill between results.json and the result lines kept some of them from
    # results.jsonl: `finetune --resume` puts them back from results.json (whose "rows" it
    # records, one "run_id" key a row; a results.json of before them records none).
    rows=$(grep -c '"run_id"' "$dir/seed${seed}/results.json" || true)
    lines=$(grep -c '"run_id".*}$' "$dir/results.jsonl" 2>/dev/null || true)  # whole lines: a torn one lacks its }
    if ((${lines:-0} >= rows)); then rp_log "finetune $exp/${name}_s$seed: done, skipped"; return 0; fi
    mode=(--resume); rp_log "finetune $exp/${name}_s$seed: finished, but ${lines:-0} of its $rows result lines are in its results.jsonl: resuming to put them back"
  # An interrupted run (its config.yaml written) continues where its stop left it, exactly; a
  # folder without one never trained and is replaced.
  elif [[ -f "$dir/config.yaml" ]]; then
    rp_stamp_check "$dir" "$stamp" "finetune $exp/${name}_s$seed" "$settings"
    mode=(--resume); rp_log "finetune $exp/${name}_s$seed: resuming"
  else
    [[ -d "$dir" ]] && mode=(--overwrite)
    rp_stamp_write "$stamp" "$settings"
  fi
  rp_exec "${FT_LAUNCH[@]+"${FT_LAUNCH[@]}"}" "$BIN" "${cmd[@]}" --init "$init" --seeds "$seed" --run-dir "$dir" "${mode[@]+"${mode[@]}"}" "${sets[@]}"
}

# rp_collect EXP: the result lines of EXP's finished runs -> $OUT/tables/EXP/results.jsonl.
rp_collect() {
  local exp="$1"
  local files=()
  mapfile -t files < <(find "$OUT/finetune/$exp" -name results.jsonl -size +0 2>/dev/null | sort)
  [[ "$DRY_RUN" == 1 ]] && return 0
  [[ ${#files[@]} -gt 0 ]] || rp_die "no result lines under $OUT/finetune/$exp"
  mkdir -p "$OUT/tables/$exp"
  cat "${files[@]}" >"$OUT/tables/$exp/results.jsonl"
}

# rp_tables EXP TABLE: rpe-train tables (TABLE: 2, 3 or 4) over the finished runs of EXP
# -> $OUT/tables/EXP/tables.{md,csv,json}.
rp_tables() {
  rp_collect "$1"
  [[ "$DRY_RUN" == 1 ]] && return 0
  rp_exec "$BIN" tables --results "$OUT/tables/$1/results.jsonl" --out "$OUT/tables/$1" --only "$2"
}

# rp_extra_table NAME [ARGS...]: one of the experiment's other tables (cost, table4-scaled,
# table5, extrapolation), rendered by `rpe-train tables NAME` -> NAME's .md, .csv and .json.
rp_extra_table() {
  [[ "$DRY_RUN" == 1 ]] && return 0
  rp_exec "$BIN" tables "$@"
}

# rp_need_plot: stop at once (exit 2, one line) when PY cannot draw: plot.py comes last, after
# hours of training, and would end in a traceback there. quickstart.sh installs no matplotlib
# (install_deps.sh adds it with --test). Checked in a dry run too, which says what would fail.
rp_need_plot() {
  command -v "$PY" >/dev/null || rp_die "python '$PY' not found (the figures need it): pass --python or set RPE_PYTHON"
  "$PY" -c 'import matplotlib' >/dev/null 2>&1 ||
    rp_die "$PY has no matplotlib, which draws the figures: scripts/install_deps.sh --test, or $PY -m pip install matplotlib"
}

# rp_plot WHAT [ARGS...]: a PNG figure (scripts/reproduce/plot.py, matplotlib); tables are C++'s.
rp_plot() {
  [[ "$DRY_RUN" == 1 ]] && return 0
  rp_exec "$PY" "$RP_ROOT/scripts/reproduce/plot.py" "$@"
}
