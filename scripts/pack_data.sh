#!/usr/bin/env bash
# Packs the real data of the GPU check's second stage (scripts/gpu_table2.sh, docs/gpu.md) into
# one folder small enough to carry to a machine without network (~20 MB from the public data):
#   vocab.txt                  BERT's uncased WordPiece vocabulary
#   squad/{train,dev}-v1.1.json.gz
#   corpus.txt.gz              the pretraining text: each corpus file as one document, then SQuAD
#                              train's paragraphs, one article per document (dev's never: it is
#                              the evaluation set); rpe-train reads .gz as is
#   manifest.json              what went in: sources, bytes, sha256, documents, lines
# Usage: scripts/pack_data.sh --from DIR [--out DIR] [--corpus a.txt,b.txt] [--sample] [--overwrite]
#   --from DIR   holds squad/train-v1.1.json, squad/dev-v1.1.json and vocab/uncased/vocab.txt
#                (download_data.sh's layout) and, unless --corpus is given, corpus/*.txt
#   --out DIR    default gpu-data (git-ignored); an existing one is kept unless --overwrite
#   --sample     a slice for the CPU smoke test: 3,000 lines of each corpus file, the first
#                article of SQuAD train (8 paragraphs) and of dev (4 paragraphs)
# The folder is built under a temporary name and renamed: an interrupted run leaves nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
FROM="" OUT=gpu-data CORPUS="" SAMPLE=0 OVERWRITE=0
die() { echo "pack_data.sh: $*" >&2; exit 2; }
while (($#)); do
  case $1 in
    --from) FROM=${2:-}; shift ;;
    --out) OUT=${2:-}; shift ;;
    --corpus) CORPUS=${2:-}; shift ;;
    --sample) SAMPLE=1 ;;
    --overwrite) OVERWRITE=1 ;;
    *) die "unknown argument '$1' (usage: --from DIR [--out DIR] [--corpus a.txt,b.txt] [--sample] [--overwrite])" ;;
  esac
  shift
done
[[ -n $FROM ]] || die "--from DIR is required (a folder with squad/, vocab/uncased/ and corpus/)"
[[ -d $FROM ]] || die "--from $FROM: no such folder"
[[ -n $OUT ]] || die "--out needs a folder name"
for f in squad/train-v1.1.json squad/dev-v1.1.json vocab/uncased/vocab.txt; do
  [[ -f $FROM/$f ]] || die "$FROM/$f: not found"
done
corpus=()
if [[ -n $CORPUS ]]; then
  IFS=, read -r -a corpus <<<"$CORPUS"
else
  shopt -s nullglob
  corpus=("$FROM"/corpus/*.txt)
  shopt -u nullglob
  ((${#corpus[@]})) || die "$FROM/corpus: no .txt files (or pass --corpus)"
fi
for f in "${corpus[@]}"; do [[ -f $f ]] || die "--corpus: $f not found"; done
if [[ -e $OUT ]] && ((!OVERWRITE)); then die "$OUT exists (pass --overwrite to replace it)"; fi

tmp="$OUT.tmp.$$"
rm -rf "$tmp"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/squad"
python3 - "$FROM" "$tmp" "$SAMPLE" "${corpus[@]}" <<'PY'
"""Writes vocab.txt, squad/*.json.gz, corpus.txt.gz and manifest.json into the temporary folder."""
import gzip, hashlib, json, os, sys
src, out, sample, corpus = sys.argv[1], sys.argv[2], sys.argv[3] == "1", sys.argv[4:]

def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

def load_squad(name, paragraphs):
    path = os.path.join(src, "squad", name)
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        data = d["data"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"pack_data.sh: {path}: not a SQuAD file ({e})")
    if sample:
        d["data"] = data[:1]
        d["data"][0]["paragraphs"] = d["data"][0]["paragraphs"][:paragraphs]
    return path, d

manifest = {"sample": sample, "files": {}}
vocab = os.path.join(src, "vocab", "uncased", "vocab.txt")
with open(vocab, "rb") as f, open(os.path.join(out, "vocab.txt"), "wb") as g:
    g.write(f.read())
manifest["files"]["vocab.txt"] = {"from": "vocab/uncased/vocab.txt", "sha256": sha256(vocab)}

train_path, train = load_squad("train-v1.1.json", 8)
for name, (path, d) in {"train-v1.1.json": (train_path, train),
                        "dev-v1.1.json": load_squad("dev-v1.1.json", 4)}.items():
    with gzip.open(os.path.join(out, "squad", name + ".gz"), "wt", encoding="utf-8", compresslevel=9) as g:
        json.dump(d, g, ensure_ascii=False)
    questions = sum(len(p["qas"]) for a in d["data"] for p in a["paragraphs"])
    manifest["files"][f"squad/{name}.gz"] = {"from": f"squad/{name}", "sha256": sha256(path),
                                             "articles": len(d["data"]), "questions": questions}

# The corpus: blank lines separate documents; a line is a sentence or a paragraph.
docs = lines = 0
with gzip.open(os.path.join(out, "corpus.txt.gz"), "wt", encoding="utf-8", compresslevel=9) as g:
    sources = []
    for path in corpus:
        n = 0
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                g.write(line + "\n")
                n += 1
                if sample and n >= 3000:
                    break
        g.write("\n")
        docs, lines = docs + 1, lines + n
        sources.append({"file": os.path.basename(path), "sha256": sha256(path), "lines": n})
    for article in train["data"]:
        paragraphs = [" ".join(p["context"].split()) for p in article["paragraphs"]]
        g.write("\n".join(paragraphs) + "\n\n")
        docs, lines = docs + 1, lines + len(paragraphs)
    sources.append({"file": "squad/train-v1.1.json (paragraphs)", "articles": len(train["data"])})
manifest["files"]["corpus.txt.gz"] = {"sources": sources, "documents": docs, "lines": lines}
with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)
print(f"pack_data.sh: corpus {docs} documents, {lines} lines")
PY
rm -rf "$OUT"
mv "$tmp" "$OUT"
trap - EXIT
echo "pack_data.sh: wrote $OUT ($(du -sh "$OUT" | cut -f1))"
