#!/usr/bin/env bash
# Downloads the full public datasets that the mini- and paper-scale experiments use into DIR
# (default data/full/, git-ignored). The demo and the tests need none of this: they use
# the generated samples in data/sample/.
#   squad   SQuAD v1.1 and v2.0 train/dev JSON (rajpurkar.github.io)
#   glue    GLUE tasks in the standard TSV layout (via the tasks' public hosting)
#   vocab   BERT-base WordPiece vocabularies (uncased, cased) from the public checkpoints
#   corpus  WikiText-103 raw (Merity et al. 2016; ~540 MB of Wikipedia articles, CC BY-SA),
#           the mini presets' pretraining text, rewritten one article per blank-line-separated
#           document, one paragraph per line: DIR/corpus/wikitext-103/{train,valid,test}.txt
# Paper-scale pretraining text (BooksCorpus + English Wikipedia) is the user's to bring:
# point data.train_files at plain-text or .gz files and run rpe-train prepare-data.
# Usage: scripts/download_data.sh [--dir DIR] [squad] [glue] [vocab] [corpus]   (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=data/full
WHAT=()
while (($#)); do
  case "$1" in
    --dir) DIR="$2"; shift 2 ;;
    squad|glue|vocab|corpus) WHAT+=("$1"); shift ;;
    *) echo "usage: $0 [--dir DIR] [squad] [glue] [vocab] [corpus]" >&2; exit 2 ;;
  esac
done
((${#WHAT[@]})) || WHAT=(squad glue vocab corpus)
mkdir -p "$DIR"

fetch() {  # fetch URL FILE: skip when present, download to a temp name, then rename
  local url="$1" out="$2"
  if [ -s "$out" ]; then echo "[data] have $out"; return; fi
  mkdir -p "$(dirname "$out")"
  echo "[data] $url -> $out"
  curl -fL --retry 3 -o "$out.part" "$url"
  mv "$out.part" "$out"
}

for w in "${WHAT[@]}"; do
  case "$w" in
    squad)
      base=https://rajpurkar.github.io/SQuAD-explorer/dataset
      for f in train-v1.1.json dev-v1.1.json; do fetch "$base/$f" "$DIR/squad/$f"; done
      for f in train-v2.0.json dev-v2.0.json; do fetch "$base/$f" "$DIR/squad2/$f"; done
      ;;
    glue)
      # GLUE's own download script names these archive locations.
      base=https://dl.fbaipublicfiles.com/glue/data
      for task in CoLA SST-2 QQP STS-B MNLI QNLI RTE WNLI; do
        if [ -d "$DIR/glue/$task" ]; then echo "[data] have $DIR/glue/$task"; continue; fi
        fetch "$base/$task.zip" "$DIR/glue/$task.zip"
        (cd "$DIR/glue" && unzip -q -o "$task.zip" && rm "$task.zip")
      done
      # MRPC ships as the SentEval-hosted tokenized files (what the GLUE script fetches).
      mrpc=https://dl.fbaipublicfiles.com/senteval/senteval_data
      fetch "$mrpc/msr_paraphrase_train.txt" "$DIR/glue/MRPC/msr_paraphrase_train.txt"
      fetch "$mrpc/msr_paraphrase_test.txt" "$DIR/glue/MRPC/msr_paraphrase_test.txt"
      echo "[data] MRPC: split train/dev with GLUE's dev_ids.tsv as download_glue_data.py does"
      ;;
    vocab)
      hf=https://huggingface.co
      fetch "$hf/bert-base-uncased/resolve/main/vocab.txt" "$DIR/vocab/uncased/vocab.txt"
      fetch "$hf/bert-base-cased/resolve/main/vocab.txt" "$DIR/vocab/cased/vocab.txt"
      ;;
    corpus)
      wt="$DIR/corpus/wikitext-103"
      if [ -s "$wt/train.txt" ]; then echo "[data] have $wt"; continue; fi
      fetch https://wikitext.smerity.com/wikitext-103-raw-v1.zip "$DIR/corpus/wikitext-103-raw-v1.zip"
      (cd "$DIR/corpus" && unzip -q -o wikitext-103-raw-v1.zip)
      mkdir -p "$wt"
      # WikiText lines: " = Title = " opens an article, " = = Section = = " headings, paragraphs
      # with a leading space, blank lines between everything. Out: the title line, then one
      # paragraph per line; a blank line between articles (data.document_format: blank_line).
      for split in train valid test; do
        awk '/^ = [^=].* = $/ { if (n++) print ""; t = $0; gsub(/^ = | = $/, "", t); print t; next }
             /^ (= )+.*( =)+ $/ || /^ *$/ { next }
             { sub(/^ /, ""); sub(/ $/, ""); print }' \
          "$DIR/corpus/wikitext-103-raw/wiki.$split.raw" > "$wt/$split.txt.part"
        mv "$wt/$split.txt.part" "$wt/$split.txt"
      done
      rm -rf "$DIR/corpus/wikitext-103-raw" "$DIR/corpus/wikitext-103-raw-v1.zip"
      ;;
  esac
done
echo "[data] done: $DIR"
