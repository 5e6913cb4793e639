#!/usr/bin/env bash
# Downloads the full public datasets that the paper-scale experiments use into DIR
# (default data/full/, git-ignored). The demo and the tests need none of this: they use
# the generated samples in data/sample/.
#   squad   SQuAD v1.1 and v2.0 train/dev JSON (rajpurkar.github.io)
#   glue    GLUE tasks in the standard TSV layout (via the tasks' public hosting)
#   vocab   BERT-base WordPiece vocabularies (uncased, cased) from the public checkpoints
# Pretraining text (BooksCorpus + English Wikipedia in the paper) is the user's to bring:
# point data.train_files (or rpe-train prepare-data) at plain-text files.
# Usage: scripts/download_data.sh [--dir DIR] [squad] [glue] [vocab]   (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=data/full
WHAT=()
while (($#)); do
  case "$1" in
    --dir) DIR="$2"; shift 2 ;;
    squad|glue|vocab) WHAT+=("$1"); shift ;;
    *) echo "usage: $0 [--dir DIR] [squad] [glue] [vocab]" >&2; exit 2 ;;
  esac
done
((${#WHAT[@]})) || WHAT=(squad glue vocab)
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
  esac
done
echo "[data] done: $DIR"
