#!/usr/bin/env bash
# End-to-end checks of the data subcommands: prepare-data prints a summary and is a no-op
# on a rerun; gzip and one-document-per-line input; tokenize and train-tokenizer work; bad
# input (non-UTF-8, empty file, a folder, missing vocabulary, truncated, foreign or bit-flipped
# shard, stale shards) gives a one-line error naming the file, exit 2; pretraining reads
# prepared shards.
# Usage: test_data_cli.sh RPE_TRAIN_BINARY SOURCE_DIR
set -u
BIN=$1
SRC=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# A tiny vocabulary and a small corpus of our own.
{ printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n'; for c in {a..z}; do echo "$c"; done;
  for c in {a..z}; do echo "##$c"; done; printf 'the\ncat\n.\n'; } > "$T/vocab.txt"
for d in $(seq 1 60); do
  for s in 1 2 3; do echo "the cat number $d sat on mat $s and looked at the dog ."; done
  echo
done > "$T/corpus.txt"
cat > "$T/cfg.yaml" <<YAML
extends: [$SRC/configs/model/tiny.yaml, $SRC/configs/attention/absolute.yaml]
data:
  train_files: [$T/corpus.txt]
  tokenizer: wordpiece
  tokenizer_model: $T/vocab.txt
  valid_fraction: 0.1
  max_seq_len: 32
  shards: $T/shards
train:
  batch_size: 4
  max_steps: 2
  warmup_steps: 1
  log_every: 1
  eval_batches: 1
  device: cpu
run:
  root: $T/runs
YAML

# expect_error NAME EXPECTED_TEXT CMD... : exit code 2 and exactly one "error:" line on stderr, containing
# the text (pretrain logs a few [run] lines before it fails).
expect_error() {
  local name=$1 text=$2
  shift 2
  "$@" > "$T/out" 2> "$T/err"
  local rc=$?
  local lines
  lines=$(grep -c '^error: ' "$T/err")
  if [[ $rc -ne 2 ]]; then fail "$name: exit code $rc, expected 2 ($(cat "$T/err"))"; fi
  if ! grep '^error: ' "$T/err" | grep -qF -- "$text"; then fail "$name: no error line with '$text': $(cat "$T/err")"; fi
  if [[ $lines -ne 1 ]]; then fail "$name: $lines error lines on stderr"; fi
}

out=$("$BIN" prepare-data --config "$T/cfg.yaml" 2>/dev/null) || fail "prepare-data failed"
echo "$out"
[[ $out == *"60 documents (54 train, 6 valid)"* ]] || fail "prepare-data summary: $out"
[[ $out == *"MB/s"* ]] || fail "no MB/s in the summary"
ls "$T"/shards/train-00000.shard "$T"/shards/valid-00000.shard "$T"/shards/manifest.json > /dev/null || fail "no shards"
# New shards are read back once and stamped, so no training start (on any rank) re-reads them.
[[ $out == *"shards verified against manifest.json"* ]] || fail "new shards were not verified: $out"
ls "$T"/shards/train-00000.shard.verified "$T"/shards/valid-00000.shard.verified > /dev/null || fail "no .verified stamps"
again=$("$BIN" prepare-data --config "$T/cfg.yaml" 2>/dev/null)
[[ $again == *"up to date"* ]] || fail "rerun was not a no-op: $again"

tok=$(echo "The cat." | "$BIN" tokenize --config "$T/cfg.yaml")
[[ $tok == '{"ids":[57,58,59],"offsets":[[0,3],[4,7],[7,8]],"pieces":["the","cat","."],"word_start":[1,1,1]}' ]] ||
  fail "tokenize printed $tok"

"$BIN" pretrain --config "$T/cfg.yaml" > "$T/pretrain.log" 2>&1 || fail "pretrain from shards: $(tail -3 "$T/pretrain.log")"
grep -q "held-out MLM loss" "$T/pretrain.log" || fail "pretrain from shards printed no result"

# SentencePiece: train a model, then prepare shards with it.
"$BIN" train-tokenizer --config "$T/cfg.yaml" --set data.tokenizer=sentencepiece --set data.tokenizer_vocab_size=60 \
  --out "$T/sp.model" > /dev/null 2>&1 || fail "train-tokenizer failed"
[[ -s $T/sp.model ]] || fail "no sentencepiece model written"
# An existing model (a run's ids mean its pieces) is replaced only when told.
sp_sum=$(cksum < "$T/sp.model")
expect_error sp_exists "$T/sp.model: exists (a run may be using it" \
  "$BIN" train-tokenizer --config "$T/cfg.yaml" --set data.tokenizer=sentencepiece --set data.tokenizer_vocab_size=50 \
  --out "$T/sp.model"
[[ $(cksum < "$T/sp.model") == "$sp_sum" ]] || fail "a refused train-tokenizer changed the existing model"
"$BIN" train-tokenizer --config "$T/cfg.yaml" --set data.tokenizer=sentencepiece --set data.tokenizer_vocab_size=60 \
  --out "$T/sp.model" --overwrite > /dev/null 2>&1 || fail "train-tokenizer --overwrite failed"
"$BIN" prepare-data --config "$T/cfg.yaml" --set data.tokenizer=sentencepiece --set data.tokenizer_model="$T/sp.model" \
  --out "$T/sp_shards" > /dev/null 2>&1 || fail "prepare-data with sentencepiece failed"
# A tokenizer file alone: a .model file is read as sentencepiece, vocab.txt as WordPiece.
sp_tok=$(echo "The cat." | "$BIN" tokenize --model "$T/sp.model") || fail "tokenize --model sp.model failed"
[[ $sp_tok == *'"pieces":["▁'* ]] || fail "tokenize --model sp.model printed $sp_tok"
[[ $(echo "The cat." | "$BIN" tokenize --model "$T/vocab.txt") == "$tok" ]] || fail "tokenize --model vocab.txt differs from --config"
printf 'ok\n\xff\xfe bad\n' > "$T/bad_stdin.txt"
expect_error tokenize_utf8 "tokenize: stdin line 2: invalid UTF-8 at byte offset 0" \
  sh -c '"$1" tokenize --model "$2" < "$3"' _ "$BIN" "$T/vocab.txt" "$T/bad_stdin.txt"
expect_error tokenize_both "tokenize: --config names the tokenizer" \
  "$BIN" tokenize --config "$T/cfg.yaml" --model "$T/vocab.txt"

# Bad input.
: > "$T/afile"
expect_error out_under_file "--out $T/afile/sub: $T/afile is not a folder" \
  "$BIN" prepare-data --config "$T/cfg.yaml" --out "$T/afile/sub"
printf 'good line\n\xff\xfe bad bytes\n' > "$T/bad.txt"
expect_error non_utf8 "$T/bad.txt: invalid UTF-8 at byte offset 10" \
  "$BIN" prepare-data --config "$T/cfg.yaml" --set data.train_files="$T/bad.txt" --out "$T/x"
: > "$T/empty.txt"
expect_error empty "$T/empty.txt: file is empty" \
  "$BIN" prepare-data --config "$T/cfg.yaml" --set data.train_files="$T/empty.txt" --out "$T/x"
expect_error missing_vocab "$T/nope.txt: wordpiece vocabulary not found (scripts/download_data.sh vocab fetches" \
  "$BIN" prepare-data --config "$T/cfg.yaml" --set data.tokenizer_model="$T/nope.txt" --out "$T/x"
cp -r "$T/shards" "$T/cut"
truncate -s -3 "$T/cut/train-00000.shard"
expect_error truncated_shard "$T/cut/train-00000.shard: truncated or corrupt shard" \
  "$BIN" pretrain --config "$T/cfg.yaml" --set data.shards="$T/cut" --run-dir "$T/r1"
cp -r "$T/shards" "$T/foreign"
printf 'NOTASHRD' | dd of="$T/foreign/valid-00000.shard" conv=notrunc status=none
expect_error foreign_shard "$T/foreign/valid-00000.shard: not an rpe-train shard (bad magic)" \
  "$BIN" pretrain --config "$T/cfg.yaml" --set data.shards="$T/foreign" --run-dir "$T/r2"
expect_error sp_tokenizer_mismatch "made with the sentencepiece tokenizer, the config uses wordpiece" \
  "$BIN" pretrain --config "$T/cfg.yaml" --set data.shards="$T/sp_shards" --run-dir "$T/r3"


# gzip, one document per line: 60 lines -> 60 documents.
awk 'BEGIN { RS = ""; FS = "\n" } { $1 = $1; print }' "$T/corpus.txt" | gzip > "$T/lines.txt.gz"
out=$("$BIN" prepare-data --config "$T/cfg.yaml" --set data.train_files="$T/lines.txt.gz" --set data.document_format=line \
  --out "$T/gz_shards" 2>/dev/null) || fail "prepare-data on .gz lines failed"
[[ $out == *"60 documents (54 train, 6 valid)"* ]] || fail "gzip line summary: $out"
expect_error line_format_named "read as data.document_format: line" \
  "$BIN" prepare-data --config "$T/cfg.yaml" --set data.document_format=line --out "$T/x"
mkdir -p "$T/adir"
expect_error folder "$T/adir: is a folder, not a text file" \
  "$BIN" prepare-data --config "$T/cfg.yaml" --set data.train_files="$T/adir" --out "$T/x"
# A link loop (ln -s loop loop) is no missing file: said as what it is, by every reader of the text.
ln -s loop "$T/loop"
expect_error link_loop "cannot read $T/loop: a symbolic link that cannot be resolved (too many levels of symbolic links" \
  "$BIN" prepare-data --config "$T/cfg.yaml" --set data.train_files="$T/loop" --out "$T/x"
expect_error link_loop_text "cannot read $T/loop: a symbolic link that cannot be resolved" \
  "$BIN" pretrain --config "$T/cfg.yaml" --set data.shards= --set data.train_files="$T/loop" --run-dir "$T/r_loop"
expect_error link_loop_tokenizer "cannot read $T/loop: a symbolic link that cannot be resolved" \
  "$BIN" train-tokenizer --config "$T/cfg.yaml" --set data.tokenizer=sentencepiece --set data.train_files="$T/loop" \
  --out "$T/loop.model"
# A one-word corpus whose word is two pieces (cat ##s): whole-word masking never splits it, so
# no token could be masked (a loss of 0, an accuracy of no token): refused before training.
echo "cats" > "$T/one_word.txt"
expect_error one_word "data.train_files ($T/one_word.txt): nothing to mask in the 1 training sequence" \
  "$BIN" pretrain --config "$T/cfg.yaml" --set data.shards= --set data.train_files="$T/one_word.txt" --run-dir "$T/r_one"
# One word of one piece trains, with numbers: no "nan" for the held-out set it does not have.
echo "cat" > "$T/one_piece.txt"
"$BIN" pretrain --config "$T/cfg.yaml" --set data.shards= --set data.train_files="$T/one_piece.txt" \
  --run-dir "$T/r_piece" > "$T/piece.log" 2>&1 || fail "pretrain on one one-piece word: $(tail -3 "$T/piece.log")"
! grep -qiw "nan" "$T/piece.log" || fail "a NaN printed for an empty count: $(grep -iw nan "$T/piece.log")"
grep -q "held-out MLM loss: none (nothing held out, or no held-out token masked)" "$T/piece.log" || fail "no 'none' held-out loss"
# A flipped bit in a shard: caught by --verify, and by training once the file's mtime moved.
cp -r "$T/shards" "$T/flip"
perl -e 'open(F, "+<", $ARGV[0]) or die; seek(F, 100, 0); read(F, $c, 1); seek(F, 100, 0); print F chr(ord($c) ^ 1)' \
  "$T/flip/train-00000.shard"
expect_error bit_flip "train-00000.shard: checksum" \
  "$BIN" pretrain --config "$T/cfg.yaml" --set data.shards="$T/flip" --run-dir "$T/r4"
# Stale for this config: the setting that differs is named, and the way back before the way
# that replaces the shards.
expect_error stale_shards "the shards were prepared with other settings: data.valid_fraction (prepared: 0.1; this config: 0.2). Give the settings they were prepared with" \
  "$BIN" pretrain --config "$T/cfg.yaml" --set data.valid_fraction=0.2 --run-dir "$T/r5"
# Another corpus than the one prepared: named as such, and no "gone since prepare-data" warning
# for a file the shards never held.
expect_error other_corpus "other settings: $T/never.txt: file not found (the shards were prepared from $T/corpus.txt)" \
  "$BIN" pretrain --config "$T/cfg.yaml" --set "data.train_files=[$T/never.txt]" --run-dir "$T/r6"
! grep -q "gone since prepare-data" "$T/err" || fail "a file the shards never held was called gone since prepare-data"
# A text file listed twice, in one list or in both (however spelled): trained on twice, or its own
# held-out set.
expect_error twice_in_train "data.train_files: $T/./corpus.txt is listed in data.train_files already" \
  "$BIN" prepare-data --config "$T/cfg.yaml" --set "data.train_files=[$T/corpus.txt, $T/./corpus.txt]" --out "$T/x"
expect_error train_as_valid "data.valid_files: $T/corpus.txt is listed in data.train_files already" \
  "$BIN" prepare-data --config "$T/cfg.yaml" --set "data.valid_files=[$T/corpus.txt]" --out "$T/x"
expect_error train_as_valid_text "the held-out documents would be trained on" \
  "$BIN" pretrain --config "$T/cfg.yaml" --set data.shards= --set "data.valid_files=[$T/corpus.txt]" --run-dir "$T/r7"
# The text may go once prepared (docs/data.md): prepare-data (which scripts run before every
# run) still finds the shards up to date; only a rebuild needs the text.
cp "$T/corpus.txt" "$T/gone.txt"
"$BIN" prepare-data --config "$T/cfg.yaml" --set data.train_files="$T/gone.txt" --out "$T/gone_shards" > /dev/null 2>&1 ||
  fail "prepare-data of gone.txt"
rm "$T/gone.txt"
again=$("$BIN" prepare-data --config "$T/cfg.yaml" --set data.train_files="$T/gone.txt" --out "$T/gone_shards" 2>/dev/null) ||
  fail "prepare-data after its text was deleted: exit code $?"
[[ $again == *"up to date"* ]] || fail "prepare-data after its text was deleted: $again"
expect_error gone_rebuild "$T/gone.txt: file not found" \
  "$BIN" prepare-data --config "$T/cfg.yaml" --set data.train_files="$T/gone.txt" --out "$T/gone_shards" --force
[[ -f $T/gone_shards/manifest.json ]] || fail "a refused rebuild cleared the shards"
# A FIFO in a shard's place is refused; in place of a .verified stamp or an index cache it is
# written over (each used to hang the start: opening a FIFO waits for a writer).
for what in train-00000.shard train-00000.shard.verified "index-v*-train"; do
  rm -rf "$T/fifo" && cp -r "$T/shards" "$T/fifo"
  victim=$T/fifo/$what
  [[ -e $victim ]] || victim=$(compgen -G "$T/fifo/$what-*" | head -1)
  [[ -n $victim ]] || { fail "fifo: no $what in the shards folder"; continue; }
  rm "$victim" && mkfifo "$victim"
  if [[ $what == *.shard ]]; then
    expect_error fifo_shard "$victim: cannot open shard (not a regular file)" \
      timeout 60 "$BIN" pretrain --config "$T/cfg.yaml" --set data.shards="$T/fifo" --run-dir "$T/r8"
  else
    timeout 60 "$BIN" pretrain --config "$T/cfg.yaml" --set data.shards="$T/fifo" --run-dir "$T/r8" --overwrite \
      > "$T/out" 2>&1 || fail "fifo in place of $what: exit code $? ($(tail -1 "$T/out"))"
    [[ -f $victim && ! -p $victim ]] || fail "fifo in place of $what: not written over"
  fi
done
# SIGKILL during prepare-data: no manifest is left, so nothing is trusted; a rerun completes.
for i in $(seq 1 3000); do cat "$T/corpus.txt"; done > "$T/big.txt"
"$BIN" prepare-data --config "$T/cfg.yaml" --set data.train_files="$T/big.txt" --threads 1 --out "$T/killed" \
  > /dev/null 2>&1 &
pid=$!
# Kill as soon as the first shard is being written (not after a fixed time: on a fast machine
# the whole run can finish within a second, and a reaped-later zombie still takes the signal).
killed=0
for _ in $(seq 1 400); do
  kill -0 $pid 2>/dev/null || break
  if compgen -G "$T/killed/*" > /dev/null; then kill -9 $pid 2>/dev/null && killed=1; break; fi
  sleep 0.02
done
wait $pid 2>/dev/null
if [[ $killed == 1 && ! -f $T/killed/manifest.json ]]; then
  expect_error killed_prepare "no manifest.json" \
    "$BIN" pretrain --config "$T/cfg.yaml" --set data.shards="$T/killed" --set data.train_files="$T/big.txt" --run-dir "$T/r6"
elif [[ $killed == 1 ]]; then
  fail "prepare-data killed mid-run left a manifest"
fi
"$BIN" prepare-data --config "$T/cfg.yaml" --set data.train_files="$T/big.txt" --out "$T/killed" > "$T/out" 2>&1 ||
  fail "rerun after a kill: $(tail -1 "$T/out")"
grep -q "180000 documents" "$T/out" || fail "rerun after a kill: $(cat "$T/out")"

# Two prepare-data runs on one folder at once (two jobs, or every node running the same script):
# the second waits for the first's lock and finds the shards up to date (one of three such pairs
# failed before: the second deleted the shards the first was writing).
pids=()
for i in 1 2; do
  "$BIN" prepare-data --config "$T/cfg.yaml" --set data.train_files="$T/big.txt" --threads 1 --out "$T/race" \
    > "$T/race$i.out" 2>&1 &
  pids+=($!)
done
wait "${pids[0]}" || fail "concurrent prepare-data 1: $(tail -1 "$T/race1.out")"
wait "${pids[1]}" || fail "concurrent prepare-data 2: $(tail -1 "$T/race2.out")"
[[ $(cat "$T/race1.out" "$T/race2.out" | grep -c "up to date") == 1 ]] ||
  fail "concurrent prepare-data: not one run and one up-to-date check: $(cat "$T/race1.out" "$T/race2.out")"
"$BIN" prepare-data --config "$T/cfg.yaml" --set data.train_files="$T/big.txt" --out "$T/race" --verify > "$T/out" 2>&1 ||
  fail "concurrent prepare-data left shards that do not verify: $(tail -1 "$T/out")"

if [[ $fails -ne 0 ]]; then echo "$fails check(s) failed"; exit 1; fi
echo "all data CLI checks passed"
