# The reproduction scripts' stamps (sourced by lib.sh, not run): the settings and input files a
# run was asked for, kept beside it, so that a run is reused (skipped or resumed) only for the
# settings it was made with. Kept apart from lib.sh to keep each file under 400 lines.

# rp_portable TEXT: TEXT with the --out folder written <out> and the checkout <repo>, so a stamp
# stays valid where the folders move (a run folder carried to another machine, a moved --out).
rp_portable() {
  local text="$1"
  text="${text//"$OUT"/<out>}"
  printf '%s' "${text//"$RP_ROOT"/<repo>}"
}

# rp_stamp_check DIR STAMP WHAT TEXT: reusing run DIR (finished or to be resumed) is allowed only
# if STAMP holds TEXT, the settings asked for now. A run from before stamps is reused as is; one
# stamped before stamps named input files has its settings compared and its inputs recorded now.
# An input the stamp names that is gone now (a finished run's start checkpoint deleted to save
# space, or not carried along) cannot be compared: it is left out, with a log line.
rp_stamp_check() {
  local dir="$1" stamp="$2" what="$3" text recorded="" line path changes was now
  [[ "$DRY_RUN" == 1 ]] && return 0
  text="$(rp_portable "$4")"
  if [[ ! -f "$stamp" ]]; then rp_log "$what: $dir has no stamp (made before stamps): reused as is"; return 0; fi
  while IFS= read -r line || [[ -n "$line" ]]; do
    if [[ "$line" == "input: "* ]]; then
      path="${line#input: }" path="${path% * *}" path="${path//<out>/"$OUT"}" path="${path//<repo>/"$RP_ROOT"}"
      if [[ ! -f "$path" ]]; then
        rp_log "$what: its input $path is gone: not compared"
        text="$(grep -vxF "$line" <<<"$text" || true)"
        continue
      fi
    fi
    recorded+="${recorded:+$'\n'}$line"
  done <"$stamp"
  # Settings that do not change what a run computes are left out: where the shards are kept (its
  # corpus and tokenizer are inputs, by content: runs stamped before the shards of a --corpus
  # moved under <out> stay reusable), and how a job runs — its time limit (a resubmitted job may
  # have another), how long collectives wait, CPU threads, the all-reduce's bucket size.
  local operational='^(data\.shards|train\.time_limit_min|train\.dist_timeout_s|train\.threads|train\.bucket_mb): '
  recorded="$(grep -Ev "$operational" <<<"$recorded" || true)" text="$(grep -Ev "$operational" <<<"$text" || true)"
  if ! grep -q '^input: ' "$stamp" && grep -q '^input: ' <<<"$text"; then
    text="$(grep -v '^input: ' <<<"$text")"
    if [[ "$recorded" == "$text" ]]; then
      rp_log "$what: $dir's stamp predates input files: inputs recorded now"
      rp_stamp_write "$stamp" "$4"
      return 0
    fi
  fi
  [[ "$recorded" == "$text" ]] && return 0
  local newer
  [[ -n "${RP_DEFAULTS+x}" ]] || RP_DEFAULTS="$("$BIN" dump-config --defaults)" || rp_die "$BIN dump-config --defaults failed"
  newer="$(rp_newer_keys "$recorded" "$text")"
  if [[ -n "$newer" ]]; then
    text="$(grep -vxF "$newer" <<<"$text" || true)"
    if [[ "$recorded" == "$text" ]]; then
      rp_log "$what: $dir's stamp predates $(awk -F': ' '{ printf "%s%s", (NR > 1 ? ", " : ""), $1 }' <<<"$newer") (at the default now): recorded now"
      rp_stamp_write "$stamp" "$4"
      return 0
    fi
  fi
  # diff exits 1 when the texts differ
  changes="$(diff <(printf '%s\n' "$recorded") <(printf '%s\n' "$text") || true)"
  was="$(sed -n '/^< /{s///p;q;}' <<<"$changes")"  # the first line each side (no head: no SIGPIPE)
  now="$(sed -n '/^> /{s///p;q;}' <<<"$changes")"
  rp_die "$what: $dir was made with other settings (${was:-?} there, ${now:-?} now); remove it or pass another --out"
}

# rp_newer_keys RECORDED TEXT: the lines of TEXT whose key RECORDED does not name and whose value
# is the key's built-in default (RP_DEFAULTS: `rpe-train dump-config --defaults`): keys added to rpe-train
# after the stamp was written, left as they were. A key changes nothing until it is set, so the
# stamp's run is the run asked for now; a new key set to another value still counts as a change.
rp_newer_keys() {
  REC="$1" DEF="$RP_DEFAULTS" awk '
    BEGIN {
      n = split(ENVIRON["REC"], rec, "\n"); for (i = 1; i <= n; i++) { k = rec[i]; sub(/: .*/, "", k); named[k] = 1 }
      n = split(ENVIRON["DEF"], def, "\n"); for (i = 1; i <= n; i++) at_default[def[i]] = 1
    }
    { k = $0; sub(/: .*/, "", k) }
    !(k in named) && ($0 in at_default)' <<<"$2"
}

# rp_stamp_write STAMP TEXT: atomically, before the run starts.
rp_stamp_write() {
  [[ "$DRY_RUN" == 1 ]] && return 0
  mkdir -p "$(dirname "$1")"
  printf '%s\n' "$(rp_portable "$2")" >"$1.tmp.$$" && mv -f "$1.tmp.$$" "$1"
}

# rp_file_id FILE: "<bytes> <hash>", the hash (sha256, 16 digits) over the file's first and last
# MiB: all of a small file, both ends of a corpus of gigabytes (read in milliseconds; an edit that
# keeps the size and both ends goes unseen).
rp_file_id() {
  local size hash
  size="$(stat -c %s -- "$1" 2>/dev/null)" || rp_die "$1: cannot read its size"
  hash="$(set -o pipefail; { head -c 1048576 -- "$1" && tail -c 1048576 -- "$1"; } 2>/dev/null | sha256sum | cut -c1-16)" ||
    rp_die "$1: cannot be read"
  printf '%s %s' "$size" "$hash"
}

# rp_inputs ARGS...: the files a run reads, by content, one "input: <path> <id>" line each
# (rp_file_id), as `rpe-train dump-config --inputs ARGS` names them: a pretraining run's corpus,
# held-out and tokenizer files; with --init, fine-tuning's tokenizer, SQuAD files or GLUE task
# files (finetune.data_dir or glue_dir) and the checkpoint --init resolves to. Added to a run's
# stamp, so that another corpus, vocabulary, data set or a redone pretraining run at the same path
# counts as other settings, as a changed key does. Absent files are left out (the run itself
# names them in its error).
rp_inputs() {
  [[ "$DRY_RUN" == 1 ]] && return 0
  local out files=()
  out="$(cd "$RP_ROOT" && "$BIN" dump-config --inputs "$@" 2>/dev/null)" ||
    rp_die "$(cd "$RP_ROOT" && "$BIN" dump-config --inputs "$@" 2>&1 >/dev/null | sed 's/^error: //' | tail -1)"
  [[ -n "$out" ]] && mapfile -t files <<<"$out"
  rp_input_lines "${files[@]+"${files[@]}"}"
}

# rp_input_lines FILE...: an "input: <path> <id>" line (rp_file_id) for each FILE that exists
# (relative paths from the repository root). Run in a command substitution.
rp_input_lines() {
  local f id
  for f in "$@"; do
    [[ "$f" == /* ]] || f="$RP_ROOT/$f"
    [[ -f "$f" ]] || continue
    id="$(rp_file_id "$f")" || exit 2  # its one-line error is out; set -e does not reach in here
    printf 'input: %s %s\n' "$f" "$id"
  done
}

# rp_settings ARGS...: the resolved config `rpe-train dump-config --flat ARGS` prints, from the
# repository root as the runs start (empty in a dry run: nothing is compared or written then).
rp_settings() {
  [[ "$DRY_RUN" == 1 ]] && return 0
  local out
  out="$(cd "$RP_ROOT" && "$BIN" dump-config --flat "$@" 2>/dev/null)" ||
    rp_die "$(cd "$RP_ROOT" && "$BIN" dump-config --flat "$@" 2>&1 >/dev/null | sed 's/^error: //' | tail -1)"
  printf '%s' "$out"
}
