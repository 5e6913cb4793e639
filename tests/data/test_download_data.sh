#!/usr/bin/env bash
# scripts/download_data.sh end to end against a local file:// mirror, offline. The mirror is
# laid out like the real hosts (MIRROR/HOST/PATH) and built from ../shared/data:
#   - SQuAD v1.1 train/dev and v2.0 dev as they are; v2.0 train is not in ../shared, so the
#     mirror serves dev-v2.0.json under that name (a stand-in: only the bytes are compared).
#   - GLUE task zips holding TASK/*.tsv for the tasks ../shared has (CoLA, SST-2, STS-B, RTE,
#     WNLI; QNLI's dev/test), and AX.tsv from diagnostic/. MNLI, QQP and QNLI's train file are
#     not in ../shared: they are fabricated here, a few rows in their real column layouts, so
#     that the whole glue step runs; a missing file in the mirror is tested separately (RTE.zip).
#   - MRPC as SentEval hosts it, rebuilt from the shared GLUE TSVs: msr_paraphrase_train.txt is
#     train.tsv's and dev.tsv's rows interleaved (the dev rows scattered, so the split must go by
#     ID pair, not position), msr_paraphrase_test.txt is test.tsv's rows with a placeholder
#     label (the real labels are not public in GLUE's test.tsv), and dev_ids.tsv lists dev.tsv's
#     pairs in reverse order. Their sizes equal the published sizes of the real files.
#   - the BERT vocabularies, and a tiny fabricated WikiText-103 zip for the corpus step.
# Checks: every GLUE task folder has its TSVs; MRPC train/dev/test.tsv equal the shared GLUE
# files byte for byte (same pairs, labels, strings, header, order); the other files equal their
# mirror sources; the corpus rewrite; a rerun says it has everything and touches nothing;
# RPE_DATA_MIRROR works like --mirror; a missing mirror file, a broken zip and a dev_ids.tsv
# naming unknown pairs each exit 1 with one stderr line and leave no partial output.
# Usage: test_download_data.sh SOURCE_DIR   (exit 77 = skipped: no SOURCE_DIR/../shared/data;
#        KEEP=1 keeps the temporary folder for a look)
set -u
SRC=$(cd "$1" && pwd)
SHARED="$SRC/../shared/data"
[ -d "$SHARED/glue/MRPC" ] || { echo "skip: no $SHARED"; exit 77; }
for c in curl python3; do command -v $c > /dev/null || { echo "skip: no $c"; exit 77; }; done
T=$(mktemp -d)
trap 'if [ -n "${KEEP:-}" ]; then echo "kept $T"; else rm -rf "$T"; fi' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
DL="$SRC/scripts/download_data.sh"
M="$T/mirror"
G="$M/dl.fbaipublicfiles.com/glue/data"
SE="$M/dl.fbaipublicfiles.com/senteval/senteval_data"
SQ="$M/rajpurkar.github.io/SQuAD-explorer/dataset"
mkdir -p "$G" "$SE" "$SQ" "$T/stage"

# --- the mirror ---
ln -s "$SHARED/squad/train-v1.1.json" "$SHARED/squad/dev-v1.1.json" "$SHARED/squad2/dev-v2.0.json" "$SQ/"
ln -s "$SHARED/squad2/dev-v2.0.json" "$SQ/train-v2.0.json"
for v in uncased cased; do
  mkdir -p "$M/huggingface.co/bert-base-$v/resolve/main"
  ln -s "$SHARED/vocab/$v/vocab.txt" "$M/huggingface.co/bert-base-$v/resolve/main/vocab.txt"
done
ln -s "$SHARED/glue/diagnostic/diagnostic.tsv" "$G/AX.tsv"
mkzip() {  # mkzip ARCHIVE TASK: zip stage/TASK/ as the archive's TASK/ folder
  (cd "$T/stage" && python3 -m zipfile -c "$G/$1" "$2") || fail "cannot build $1"
}
for t in CoLA SST-2 STS-B RTE WNLI; do cp -r "$SHARED/glue/$t" "$T/stage/"; mkzip "$t.zip" "$t"; done
mkdir -p "$T/stage/QNLI" "$T/stage/MNLI" "$T/stage/QQP"
cp "$SHARED/glue/QNLI/dev.tsv" "$SHARED/glue/QNLI/test.tsv" "$T/stage/QNLI/"
printf 'index\tquestion\tsentence\tlabel\n0\tWho wrote it?\tIt was written by Ann.\tentailment\n1\tWhen?\tIt rained.\tnot_entailment\n' \
  > "$T/stage/QNLI/train.tsv"
mnli_head=$'index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2'
printf '%s\tlabel1\tgold_label\n0\t1\t1e\tfiction\t-\t-\t-\t-\tA man sleeps.\tA person rests.\tentailment\tentailment\n' "$mnli_head" > "$T/stage/MNLI/train.tsv"
for s in matched mismatched; do
  printf '%s\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5\tgold_label\n0\t2\t2n\tslate\t-\t-\t-\t-\tIt is red.\tIt is blue.\tcontradiction\tcontradiction\tcontradiction\tneutral\tcontradiction\tcontradiction\n' "$mnli_head" \
    > "$T/stage/MNLI/dev_$s.tsv"
  printf '%s\n0\t3\t3c\tslate\t-\t-\t-\t-\tA cat.\tAn animal.\n' "$mnli_head" > "$T/stage/MNLI/test_$s.tsv"
done
printf 'id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n0\t1\t2\tHow old is it?\tWhat age is it?\t1\n' > "$T/stage/QQP/train.tsv"
printf 'id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate\n1\t3\t4\tWhy?\tHow?\t0\n' > "$T/stage/QQP/dev.tsv"
printf 'id\tquestion1\tquestion2\n0\tWho?\tWhom?\n' > "$T/stage/QQP/test.tsv"
mkzip QNLIv2.zip QNLI; mkzip MNLI.zip MNLI; mkzip QQP-clean.zip QQP
MR="$SHARED/glue/MRPC"
head -n 1 "$MR/train.tsv" > "$SE/msr_paraphrase_train.txt"     # the BOM header GLUE copies
awk 'FNR == 1 { f++; next } f == 1 { d[++nd] = $0; next }
     { print; if (FNR % 9 == 0 && k < nd) print d[++k] } END { while (k < nd) print d[++k] }' \
  "$MR/dev.tsv" "$MR/train.tsv" >> "$SE/msr_paraphrase_train.txt"
head -n 1 "$MR/train.tsv" > "$SE/msr_paraphrase_test.txt"
awk -F'\t' -v OFS='\t' 'NR > 1 { $1 = 0; print }' "$MR/test.tsv" >> "$SE/msr_paraphrase_test.txt"
awk -F'\t' 'NR > 1 { p[NR] = $2 "\t" $3 } END { for (i = NR; i > 1; i--) print p[i] }' "$MR/dev.tsv" > "$G/mrpc_dev_ids.tsv"
# The real files' sizes as published with their checksums (Hugging Face datasets' glue/mrpc).
for f in "$SE/msr_paraphrase_train.txt:1047044" "$SE/msr_paraphrase_test.txt:441275" "$G/mrpc_dev_ids.tsv:6222"; do
  [ "$(stat -c %s "${f%:*}")" = "${f##*:}" ] || fail "mirror ${f%:*}: $(stat -c %s "${f%:*}") bytes, the real file has ${f##*:}"
done
mkdir -p "$T/stage/wikitext-103-raw" "$M/wikitext.smerity.com"
for s in train valid test; do
  printf ' \n = Alpha %s = \n \n First paragraph of %s . \n \n = = Part = = \n \n Second one . \n \n = Beta = \n \n Only line . \n' \
    "$s" "$s" > "$T/stage/wikitext-103-raw/wiki.$s.raw"
done
(cd "$T/stage" && python3 -m zipfile -c "$M/wikitext.smerity.com/wikitext-103-raw-v1.zip" wikitext-103-raw)

# --- a full download from the mirror ---
O="$T/out"
bash "$DL" --mirror "file://$M" --dir "$O" squad glue vocab corpus > "$T/log1" 2>&1 || fail "first run failed: $(tail -n 3 "$T/log1")"
declare -A files=(
  [CoLA]="train dev test" [SST-2]="train dev test" [MRPC]="train dev test" [STS-B]="train dev test"
  [QQP]="train dev test" [MNLI]="train dev_matched dev_mismatched test_matched test_mismatched"
  [QNLI]="train dev test" [RTE]="train dev test" [WNLI]="train dev test" [diagnostic]="diagnostic")
for t in "${!files[@]}"; do
  for f in ${files[$t]}; do [ -s "$O/glue/$t/$f.tsv" ] || fail "no $O/glue/$t/$f.tsv"; done
done
same() { cmp -s "$1" "$2" || fail "$2 differs from $1"; }
for t in CoLA SST-2 STS-B RTE WNLI; do for f in train dev test; do same "$SHARED/glue/$t/$f.tsv" "$O/glue/$t/$f.tsv"; done; done
same "$SHARED/glue/QNLI/dev.tsv" "$O/glue/QNLI/dev.tsv"
same "$SHARED/glue/diagnostic/diagnostic.tsv" "$O/glue/diagnostic/diagnostic.tsv"
same "$T/stage/MNLI/dev_mismatched.tsv" "$O/glue/MNLI/dev_mismatched.tsv"
for f in train dev test; do
  if ! cmp -s "$MR/$f.tsv" "$O/glue/MRPC/$f.tsv"; then
    fail "MRPC/$f.tsv differs from GLUE's: $(diff "$MR/$f.tsv" "$O/glue/MRPC/$f.tsv" | head -n 3 | cut -c 1-120 | tr '\n' '|')"
  fi
done
grep -q "3668 train and 408 dev pairs (split by dev_ids.tsv), 1725 test pairs" "$T/log1" || fail "no MRPC counts line in the log"
same "$SHARED/squad/train-v1.1.json" "$O/squad/train-v1.1.json"
same "$SHARED/squad2/dev-v2.0.json" "$O/squad2/dev-v2.0.json"
same "$SHARED/vocab/cased/vocab.txt" "$O/vocab/cased/vocab.txt"
printf 'Alpha valid\nFirst paragraph of valid .\nSecond one .\n\nBeta\nOnly line .\n' > "$T/want_valid"
same "$T/want_valid" "$O/corpus/wikitext-103/valid.txt"
[ -z "$(find "$O" -name '*.part' -o -name '*.zip')" ] || fail "left over: $(find "$O" -name '*.part' -o -name '*.zip' | head -n 3)"

# --- a rerun does nothing ---
snap() { find "$O" -printf '%p %i %s %T@\n' | sort; }
snap > "$T/before"
bash "$DL" --mirror "file://$M" --dir "$O" squad glue vocab corpus > "$T/log2" 2>&1 || fail "rerun failed: $(tail -n 3 "$T/log2")"
grep -q "have everything requested (squad glue vocab corpus) in $O; nothing to do" "$T/log2" || fail "rerun: no 'have everything' line: $(tail -n 1 "$T/log2")"
snap | cmp -s - "$T/before" || fail "rerun changed $O"

# --- RPE_DATA_MIRROR does what --mirror does ---
RPE_DATA_MIRROR="file://$M" bash "$DL" --dir "$T/env" vocab > "$T/log3" 2>&1 || fail "RPE_DATA_MIRROR run failed: $(tail -n 1 "$T/log3")"
same "$SHARED/vocab/uncased/vocab.txt" "$T/env/vocab/uncased/vocab.txt"

# --- failures: exit 1, one stderr line naming the culprit, nothing partial ---
expect_fail() {  # expect_fail WHAT PATTERN ARGS...: the run fails with one matching stderr line
  local what="$1" pat="$2" rc
  shift 2
  bash "$DL" --mirror "file://$M" --dir "$O" "$@" > /dev/null 2> "$T/err"; rc=$?
  [ "$rc" = 1 ] || fail "$what: exit $rc, want 1"
  [ "$(wc -l < "$T/err")" = 1 ] && grep -q -- "$pat" "$T/err" || fail "$what: stderr is not one line matching '$pat': $(head -c 300 "$T/err")"
  [ -z "$(find "$O" -name '*.part')" ] || fail "$what: left $(find "$O" -name '*.part' | head -n 1)"
}
rm -rf "$O/glue/RTE"
mv "$G/RTE.zip" "$T/RTE.zip"
# (and says how to get the files without the network)
expect_fail "missing RTE.zip" "cannot fetch file://$G/RTE.zip.* not written (offline? --mirror URL reads a copy made elsewhere" glue
[ ! -e "$O/glue/RTE" ] && [ ! -e "$O/glue/RTE.zip" ] || fail "missing RTE.zip: left $O/glue/RTE*"
echo "not a zip" > "$G/RTE.zip"
expect_fail "broken RTE.zip" "RTE.zip: cannot unpack" glue
[ ! -e "$O/glue/RTE" ] && [ ! -e "$O/glue/RTE.zip" ] || fail "broken RTE.zip: left $O/glue/RTE*"
mv -f "$T/RTE.zip" "$G/RTE.zip"
rm -rf "$O/glue/MRPC"
printf '1\t2\n' >> "$G/mrpc_dev_ids.tsv"
expect_fail "unknown dev pair" "dev_ids.tsv: 1 of its 409 pairs are not in .*msr_paraphrase_train.txt" glue
[ -z "$(ls "$O/glue/MRPC")" ] || fail "unknown dev pair: left $(ls "$O/glue/MRPC" | tr '\n' ' ')(want the inputs removed, no TSVs)"
rm "$G/mrpc_dev_ids.tsv"
expect_fail "missing dev_ids.tsv" "cannot fetch .*mrpc_dev_ids.tsv" glue
[ ! -e "$O/glue/MRPC/train.tsv" ] || fail "missing dev_ids.tsv: left MRPC/train.tsv"
bash "$DL" --mirror > /dev/null 2>&1; [ $? = 2 ] || fail "--mirror without a URL: want exit 2"
bash "$DL" --help 2>/dev/null | grep -q "^usage: " || fail "--help: want the usage on stdout and exit 0"
bash "$DL" --mirror "file://$T/nowhere" squad > /dev/null 2>&1; [ $? = 2 ] || fail "--mirror to a missing folder: want exit 2"

[ "$fails" = 0 ] && echo "download_data: all checks passed" || { echo "$fails failure(s)"; exit 1; }
