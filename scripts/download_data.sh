#!/usr/bin/env bash
# Downloads the full public datasets that the mini- and paper-scale experiments use into DIR
# (default data/full/, git-ignored). The demo and the tests need none of this: they use
# the generated samples in data/sample/.
#   squad   SQuAD v1.1 and v2.0 train/dev JSON (rajpurkar.github.io)
#   glue    the GLUE tasks in the standard layout that GLUE's own download script writes:
#           CoLA SST-2 MRPC STS-B QQP MNLI QNLI RTE WNLI as DIR/glue/<task>/*.tsv, and the
#           diagnostic set (AX) as DIR/glue/diagnostic/diagnostic.tsv. MRPC is built here from
#           the SentEval-hosted msr_paraphrase_{train,test}.txt and GLUE's dev_ids.tsv.
#   vocab   BERT-base WordPiece vocabularies (uncased, cased) from the public checkpoints
#   corpus  WikiText-103 raw (Merity et al. 2016; ~540 MB of Wikipedia articles, CC BY-SA),
#           the mini presets' pretraining text, rewritten one article per blank-line-separated
#           document, one paragraph per line: DIR/corpus/wikitext-103/{train,valid,test}.txt
# Paper-scale pretraining text (BooksCorpus + English Wikipedia) is the user's to bring:
# point data.train_files at plain-text or .gz files and run rpe-train prepare-data.
#
# Every output appears whole or not at all (written to a .part name, then renamed); a failure
# removes its temporary files and any download found broken, keeps the others, prints one line
# and exits 1. A rerun fetches only what is missing.
#
# Mirrors: --mirror URL (or RPE_DATA_MIRROR=URL) reads every file from URL/HOST/PATH instead of
# https://HOST/PATH, the layout `wget -x` writes; e.g. --mirror file:///data/mirror reads
# /data/mirror/dl.fbaipublicfiles.com/glue/data/CoLA.zip. Any URL curl reads works.
# Usage: scripts/download_data.sh [--dir DIR] [--mirror URL] [squad] [glue] [vocab] [corpus]
#        (default: all four; DIR is relative to the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
usage() {  # usage [CODE]: to stderr for a bad argument (2), to stdout for --help (0)
  local code=${1:-2}
  ((code == 0)) || exec >&2
  echo "usage: $0 [--dir DIR] [--mirror URL] [squad] [glue] [vocab] [corpus]"
  exit "$code"
}
DIR=data/full
MIRROR="${RPE_DATA_MIRROR:-}"
WHAT=()
while (($#)); do
  case "$1" in
    --dir) (($# >= 2)) || usage; DIR="$2"; shift 2 ;;
    --dir=*) DIR="${1#--dir=}"; shift ;;
    --mirror) (($# >= 2)) || usage; MIRROR="$2"; shift 2 ;;
    --mirror=*) MIRROR="${1#--mirror=}"; shift ;;
    squad|glue|vocab|corpus) WHAT+=("$1"); shift ;;
    -h|--help) usage 0 ;;
    *) usage ;;
  esac
done
((${#WHAT[@]})) || WHAT=(squad glue vocab corpus)
if [ -n "$MIRROR" ]; then
  [[ "$MIRROR" == *://* ]] || { echo "download_data.sh: --mirror $MIRROR: not a URL (e.g. file:///data/mirror)" >&2; exit 2; }
  if [[ "$MIRROR" == file://* ]] && [ ! -d "${MIRROR#file://}" ]; then
    echo "download_data.sh: --mirror $MIRROR: no such folder" >&2; exit 2
  fi
fi
mkdir -p "$DIR"

# Upstream locations (GLUE's own download script names the GLUE and SentEval ones).
SQUAD=https://rajpurkar.github.io/SQuAD-explorer/dataset
GLUE=https://dl.fbaipublicfiles.com/glue/data
SENTEVAL=https://dl.fbaipublicfiles.com/senteval/senteval_data
HF=https://huggingface.co
WIKITEXT=https://wikitext.smerity.com/wikitext-103-raw-v1.zip

say() { echo "[data] $*"; }
die() { echo "download_data.sh: $*" >&2; exit 1; }
TEMPS=()    # .part files and staging folders; whatever is left of them goes on exit
cleanup() { local t; for t in "${TEMPS[@]+"${TEMPS[@]}"}"; do rm -rf -- "$t"; done; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
WORK=0     # files fetched or written; 0 at the end means the rerun had everything

source_url() {  # the upstream URL, or its copy under the mirror (MIRROR/HOST/PATH)
  if [ -z "$MIRROR" ]; then printf '%s\n' "$1"; else printf '%s/%s\n' "${MIRROR%/}" "${1#*://}"; fi
}

# Said after a failed fetch: the way to a machine without the network.
OFFLINE=" (offline? --mirror URL reads a copy made elsewhere with wget -x)"
fetch() {  # fetch URL FILE: skip when present, download to FILE.part, then rename
  local url out="$2" tmp="$2.part" err
  url=$(source_url "$1")
  if [ -s "$out" ]; then say "have $out"; return; fi
  mkdir -p "$(dirname "$out")"
  TEMPS+=("$tmp")
  say "$url -> $out"
  if [ -t 2 ]; then  # at a terminal: curl's progress bar (and its own error line)
    curl -fSL --retry 3 --progress-bar -o "$tmp" "$url" || die "cannot fetch $url (curl exit $?); $out not written$OFFLINE"
  elif ! err=$(curl -fsSL --retry 3 -o "$tmp" "$url" 2>&1); then
    die "cannot fetch $url: ${err##*$'\n'}; $out not written$OFFLINE"
  fi
  mv -f "$tmp" "$out"
  WORK=$((WORK + 1))
}

unpack() {  # unpack ZIP FOLDER (unzip, else Python's zipfile); a broken archive is removed
  local ok=0
  if command -v unzip > /dev/null; then unzip -q -o "$1" -d "$2" > /dev/null 2>&1 && ok=1
  else python3 -m zipfile -e "$1" "$2" > /dev/null 2>&1 && ok=1; fi
  ((ok)) && return
  rm -f "$1"
  die "$1: cannot unpack, not a zip archive? (removed; a rerun fetches it again)"
}

glue_zip() {  # glue_zip TASK ARCHIVE: DIR/glue/TASK from the archive's TASK/ folder, all or nothing
  local task="$1" zip="$DIR/glue/$2" dest="$DIR/glue/$1" stage="$DIR/glue/.$1.part"
  if [ -d "$dest" ]; then say "have $dest"; return; fi
  fetch "$GLUE/$2" "$zip"       # a complete archive is kept until its folder is in place
  TEMPS+=("$stage")
  rm -rf "$stage"
  unpack "$zip" "$stage"
  [ -s "$stage/$task/train.tsv" ] || { rm -f "$zip"; die "$zip: holds no $task/train.tsv (is it GLUE's $2?)"; }
  mv "$stage/$task" "$dest"
  rm -rf "$stage" "$zip"
  WORK=$((WORK + 1))
}

# GLUE's MRPC split, done here: the rows of msr_paraphrase_train.txt whose (#1 ID, #2 ID) pair
# is listed in dev_ids.tsv form dev.tsv, the rest train.tsv, both in file order under the source
# header (kept as it is, UTF-8 BOM included); test.tsv numbers msr_paraphrase_test.txt's rows from
# 0 under "index #1 ID #2 ID #1 String #2 String", dropping the label. Inputs: dev_ids.tsv
# (ID<TAB>ID lines, no header), train, test; outputs: the three .part files. Prints the counts,
# or one error line and exits 1.
MRPC_AWK='
function fail(msg) { print msg; failed = 1; exit 1 }
function row(name) {  # a data row: 5 fields, label 0/1, numeric IDs
  if (NF != 5 || $1 !~ /^[01]$/ || $2 !~ /^[0-9]+$/ || $3 !~ /^[0-9]+$/)
    fail(name ":" FNR ": expected label<TAB>#1 ID<TAB>#2 ID<TAB>#1 String<TAB>#2 String")
}
BEGIN { FS = OFS = "\t"; want = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String" }
FNR == 1 { f = (FILENAME == ids) ? 1 : (FILENAME == train) ? 2 : 3; had[f] = 1 }
{ sub(/\r$/, "") }
f == 1 {
  if ($0 == "") next
  if (NF != 2 || $1 !~ /^[0-9]+$/ || $2 !~ /^[0-9]+$/) fail(ids ":" FNR ": expected #1 ID<TAB>#2 ID")
  if (!(($1, $2) in dev)) { dev[$1, $2] = 1; nids++ }
  next
}
f >= 2 && FNR == 1 {
  h = $0; sub(/^\357\273\277/, "", h)
  if (h != want) fail((f == 2 ? train : test) ":1: expected the header " want)
  if (f == 2) { print > train_out; print > dev_out }
  else print "index", "#1 ID", "#2 ID", "#1 String", "#2 String" > test_out
  next
}
$0 == "" { next }
f == 2 {
  row(train)
  if (($2, $3) in dev) { print > dev_out; ndev++; if (!(($2, $3) in seen)) { seen[$2, $3] = 1; nseen++ } }
  else { print > train_out; ntrain++ }
  next
}
f == 3 { row(test); print ntest++, $2, $3, $4, $5 > test_out }
END {
  if (failed) exit 1
  if (!nids) fail(ids ": no ID pairs")
  if (!had[2]) fail(train ": empty")
  if (!had[3]) fail(test ": empty")
  if (nseen != nids) fail(ids ": " nids - nseen " of its " nids " pairs are not in " train)
  print ntrain, ndev, ntest
}'

glue_mrpc() {
  local d="$DIR/glue/MRPC" out n f
  if [ -s "$d/train.tsv" ] && [ -s "$d/dev.tsv" ] && [ -s "$d/test.tsv" ]; then say "have $d"; return; fi
  fetch "$SENTEVAL/msr_paraphrase_train.txt" "$d/msr_paraphrase_train.txt"
  fetch "$SENTEVAL/msr_paraphrase_test.txt" "$d/msr_paraphrase_test.txt"
  fetch "$GLUE/mrpc_dev_ids.tsv" "$d/dev_ids.tsv"
  TEMPS+=("$d/train.tsv.part" "$d/dev.tsv.part" "$d/test.tsv.part")
  out=$(awk -v ids="$d/dev_ids.tsv" -v train="$d/msr_paraphrase_train.txt" -v test="$d/msr_paraphrase_test.txt" \
            -v train_out="$d/train.tsv.part" -v dev_out="$d/dev.tsv.part" -v test_out="$d/test.tsv.part" \
            "$MRPC_AWK" "$d/dev_ids.tsv" "$d/msr_paraphrase_train.txt" "$d/msr_paraphrase_test.txt") \
    || { rm -f "$d/dev_ids.tsv" "$d"/msr_paraphrase_*.txt  # so that a rerun fetches them again
         die "MRPC: ${out:-awk failed}; no train/dev/test.tsv written, inputs removed"; }
  read -r -a n <<< "$out"
  for f in test dev train; do mv -f "$d/$f.tsv.part" "$d/$f.tsv"; done   # train.tsv last
  say "MRPC: $d/{train,dev,test}.tsv: ${n[0]} train and ${n[1]} dev pairs (split by dev_ids.tsv), ${n[2]} test pairs"
  WORK=$((WORK + 1))
}

corpus_wikitext() {
  local wt="$DIR/corpus/wikitext-103" zip="$DIR/corpus/wikitext-103-raw-v1.zip" stage="$DIR/corpus/.wikitext-103.part"
  if [ -s "$wt/train.txt" ] && [ -s "$wt/valid.txt" ] && [ -s "$wt/test.txt" ]; then say "have $wt"; return; fi
  fetch "$WIKITEXT" "$zip"
  TEMPS+=("$stage")
  rm -rf "$stage"
  unpack "$zip" "$stage"
  mkdir -p "$wt"
  # WikiText lines: " = Title = " opens an article, " = = Section = = " headings, paragraphs
  # with a leading space, blank lines between everything. Out: the title line, then one
  # paragraph per line; a blank line between articles (data.document_format: blank_line).
  for split in train valid test; do
    [ -f "$stage/wikitext-103-raw/wiki.$split.raw" ] || die "$zip: holds no wikitext-103-raw/wiki.$split.raw"
    TEMPS+=("$wt/$split.txt.part")
    awk '/^ = [^=].* = $/ { if (n++) print ""; t = $0; gsub(/^ = | = $/, "", t); print t; next }
         /^ (= )+.*( =)+ $/ || /^ *$/ { next }
         { sub(/^ /, ""); sub(/ $/, ""); print }' \
      "$stage/wikitext-103-raw/wiki.$split.raw" > "$wt/$split.txt.part"
    mv -f "$wt/$split.txt.part" "$wt/$split.txt"
  done
  rm -rf "$stage" "$zip"
  WORK=$((WORK + 1))
}

for w in "${WHAT[@]}"; do
  case "$w" in
    squad)
      for f in train-v1.1.json dev-v1.1.json; do fetch "$SQUAD/$f" "$DIR/squad/$f"; done
      for f in train-v2.0.json dev-v2.0.json; do fetch "$SQUAD/$f" "$DIR/squad2/$f"; done
      ;;
    glue)
      # Archive names as GLUE's download script has them today (QQP-clean, QNLIv2).
      for t in CoLA:CoLA SST-2:SST-2 STS-B:STS-B QQP:QQP-clean MNLI:MNLI QNLI:QNLIv2 RTE:RTE WNLI:WNLI; do
        glue_zip "${t%%:*}" "${t#*:}.zip"
      done
      glue_mrpc
      fetch "$GLUE/AX.tsv" "$DIR/glue/diagnostic/diagnostic.tsv"
      ;;
    vocab)
      fetch "$HF/bert-base-uncased/resolve/main/vocab.txt" "$DIR/vocab/uncased/vocab.txt"
      fetch "$HF/bert-base-cased/resolve/main/vocab.txt" "$DIR/vocab/cased/vocab.txt"
      ;;
    corpus) corpus_wikitext ;;
  esac
done
if ((WORK)); then say "done: $DIR"; else say "have everything requested (${WHAT[*]}) in $DIR; nothing to do"; fi
