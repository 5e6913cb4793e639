#!/usr/bin/env python3
"""Parity of our WordPiece tokenizer with HF transformers' BertTokenizer (the reference).

Reads a few thousand real lines from ../shared/data at test time (SQuAD contexts and
questions, the pretraining corpora, GLUE sentences, WikiText) plus our own edge cases,
encodes them with `rpe-train tokenize` and with BertTokenizer, for the uncased and the cased
vocabulary, and requires identical pieces and ids on every line. Also checks that our byte
offsets point at text that normalises to each piece.

Exit codes: 0 pass, 1 mismatch, 77 skipped (transformers or the data is missing).
Usage: wordpiece_parity.py RPE_TRAIN_BINARY SHARED_DATA_DIR [--lines N]
"""
import argparse
import json
import random
import subprocess
import sys
import unicodedata
from pathlib import Path

SKIP = 77

# Our own strings for the corner cases of BERT's basic tokenizer.
EDGE_CASES = [
    "Héllo, Wörld! Ünïcödé façade naïve café résumé",
    "ΣΊΣΥΦΟΣ and Σίσυφος; ΟΔΥΣΣΕΥΣ",
    "İstanbul İzmir DİYARBAKIR ı I",
    "e\u0301 a\u0308 o\u0302\u0323 q\u0307\u0323 combining marks",
    "CJK 你好世界 mixed漢字text 日本語のテキスト",
    "tabs\tand\u00a0nbsp\u2003em-space\u2028line-sep\u2029para-sep end",
    "zero\u200bwidth\ufeffbom\u200dzwj soft\u00adhyphen",
    "control \x01\x07\x1b chars and \ufffd replacement",
    "private\ue000use a\ue000b \uf8ff apple unassigned a\u0378b",
    "symbols $5 + 3 = <8> ^ ` | ~ © ® ™ ° ± § ¶ • … – — ‘quoted’ “double”",
    "emoji 😀👍🏽 and flags 🇺🇸",
    "a" * 100 + " " + "b" * 101 + " ok",
    "literal [MASK] and [CLS] tokens [SEP] inside [UNK] text [PAD] and [mask] lower",
    "x[MASK]y (x)[SEP]",
    "Ångström ﬁnance ﬂow Kelvin \u212a Ohm \u2126 ｆｕｌｌｗｉｄｔｈ ２０２０",
    "Hangul 한국어 텍스트 and jamo \u1100\u1161",
    "Arabic العربية Hebrew עברית Thai ภาษาไทย Devanagari हिन्दी",
    "   leading and trailing spaces   ",
    "",
    "don't won't it's O'Neil rock'n'roll U.S.A. e.g. 3.14 1,000,000",
]


def read_lines(data: Path, limit: int, seed: int = 0):
    rng = random.Random(seed)
    lines = []

    def take(items, n):
        items = [s for s in items if s.strip()]
        rng.shuffle(items)
        lines.extend(items[:n])

    squad = json.loads((data / "squad/train-v1.1.json").read_text(encoding="utf-8"))
    contexts, questions = [], []
    for art in squad["data"]:
        for par in art["paragraphs"]:
            contexts.extend(par["context"].split("\n"))
            questions.extend(q["question"] for q in par["qas"])
    take(contexts, limit // 4)
    take(questions, limit // 4)
    for name in ("brown.txt", "nlp-corpus.txt"):
        take((data / "corpus" / name).read_text(encoding="utf-8").split("\n"), limit // 8)
    glue = []
    for task, cols in (("SST-2/dev.tsv", [0]), ("CoLA/dev.tsv", [3]), ("MRPC/dev.tsv", [3, 4]),
                       ("RTE/dev.tsv", [1, 2]), ("QNLI/dev.tsv", [1, 2]), ("STS-B/dev.tsv", [7, 8])):
        rows = (data / "glue" / task).read_text(encoding="utf-8").split("\n")[1:]
        for row in rows:
            parts = row.split("\t")
            glue.extend(parts[c] for c in cols if c < len(parts))
    take(glue, limit // 8)
    take((data / "wikitext/wikitext-2/wiki.valid.tokens").read_text(encoding="utf-8").split("\n"), limit // 8)
    return [s.replace("\r", "") for s in lines] + EDGE_CASES


def ours(binary, vocab, cased, lines):
    cmd = [binary, "tokenize", "--tokenizer", "wordpiece", "--model", str(vocab)] + (["--cased"] if cased else [])
    out = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True, encoding="utf-8",
                         check=True).stdout
    return [json.loads(l) for l in out.split("\n") if l]


def offsets_ok(line, piece, begin, end, cased):
    """The original bytes at [begin, end) normalise (like BERT) to the piece text."""
    if piece == "[UNK]":
        return end > begin
    text = line.encode("utf-8")[begin:end].decode("utf-8", errors="replace")
    if piece in ("[PAD]", "[CLS]", "[SEP]", "[MASK]"):
        return text == piece
    text = "".join(c for c in text if not unicodedata.category(c).startswith("C"))  # BERT's cleaning drops them
    if not cased:
        text = "".join(c for c in unicodedata.normalize("NFD", text.lower()) if unicodedata.category(c) != "Mn")
    else:
        text = unicodedata.normalize("NFC", text)
    return piece.removeprefix("##") in text or unicodedata.normalize("NFC", text) == piece.removeprefix("##")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("data")
    ap.add_argument("--lines", type=int, default=6000)
    args = ap.parse_args()
    try:
        from transformers import BertTokenizer
    except ImportError:
        print("SKIP: transformers is not installed (pip install 'transformers>=4.40,<5')")
        return SKIP
    data = Path(args.data)
    if not (data / "vocab/uncased/vocab.txt").exists() or not (data / "squad/train-v1.1.json").exists():
        print(f"SKIP: {data} lacks vocab/ or squad/")
        return SKIP
    lines = read_lines(data, args.lines)
    failed = 0
    for name, cased in (("uncased", False), ("cased", True)):
        vocab = data / "vocab" / name / "vocab.txt"
        ref = BertTokenizer(str(vocab), do_lower_case=not cased)
        got = ours(args.binary, vocab, cased, lines)
        assert len(got) == len(lines), f"{len(got)} outputs for {len(lines)} lines"
        bad = bad_offsets = pieces = 0
        for line, g in zip(lines, got):
            want = ref.tokenize(line)
            want_ids = ref.convert_tokens_to_ids(want)
            pieces += len(want)
            if g["pieces"] != want or g["ids"] != want_ids:
                bad += 1
                if bad <= 5:
                    print(f"[{name}] MISMATCH on {line[:200]!r}\n  ours: {g['pieces'][:40]}\n  bert: {want[:40]}")
                continue
            for p, (b, e) in zip(g["pieces"], g["offsets"]):
                if not offsets_ok(line, p, b, e, cased):
                    bad_offsets += 1
                    if bad_offsets <= 5:
                        print(f"[{name}] OFFSET {p!r} -> {line.encode()[b:e]!r} in {line[:120]!r}")
        print(f"[{name}] {len(lines)} lines, {pieces} pieces: {len(lines) - bad} identical, {bad} different, "
              f"{bad_offsets} offsets that do not match their piece")
        failed += bad + bad_offsets
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
