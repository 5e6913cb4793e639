#!/usr/bin/env python3
"""Independent SQuAD v1.1 / v2.0 scorer, written from the published metric definition
(Rajpurkar et al. 2016, 2018), to check rpe-train's C++ metrics.

  normalize(s): lower-case; drop ASCII punctuation; replace the whole words a, an, the by a
                space; collapse whitespace.
  EM: normalized strings equal.  F1: token-multiset overlap between the normalized strings.
  v1.1: max over gold answers, missing predictions score 0, no overlap -> F1 0.
  v2.0: HasAns = the question lists any answer; golds that normalize to "" are dropped, no
        gold left -> [""]; if either side has no tokens, F1 = EM = [both empty]; HasAns /
        NoAns subsets; with no-answer scores: a score above 1.0 counts as predicting "" in
        exact/f1, and the threshold that maximises the total (raw scores, swept in order).

Usage: squad_reference.py DATASET PREDICTIONS [NA_PROBS]  -> prints JSON
"""
import collections
import json
import string
import sys

PUNCT = frozenset(string.punctuation)
NA_THRESH = 1.0  # the no-answer score above which a question counts as predicted unanswerable


def is_word_char(ch):
    return ch.isalnum() or ch == "_"


def normalize(text):
    text = "".join(ch for ch in text.lower() if ch not in PUNCT)
    # Drop articles: walk maximal runs of word characters instead of using a regex.
    out, i = [], 0
    while i < len(text):
        if not is_word_char(text[i]):
            out.append(text[i])
            i += 1
            continue
        j = i
        while j < len(text) and is_word_char(text[j]):
            j += 1
        word = text[i:j]
        out.append(" " if word in ("a", "an", "the") else word)
        i = j
    return " ".join("".join(out).split())


def tokens(text):
    return normalize(text).split()


def f1(pred, gold, v2):
    p, g = tokens(pred), tokens(gold)
    if v2 and (not p or not g):
        return float(p == g)
    overlap = sum((collections.Counter(p) & collections.Counter(g)).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(p), overlap / len(g)
    return 2 * precision * recall / (precision + recall)


def main():
    dataset = json.load(open(sys.argv[1], encoding="utf-8"))
    preds = json.load(open(sys.argv[2], encoding="utf-8"))
    na = json.load(open(sys.argv[3], encoding="utf-8")) if len(sys.argv) > 3 else None
    v2 = dataset.get("version") in ("v2.0", "2.0")
    em_of, f1_of, has = {}, {}, {}
    for article in dataset["data"]:
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                golds = [a["text"] for a in qa["answers"]]
                if v2:
                    has[qa["id"]] = bool(golds)
                    golds = [g for g in golds if normalize(g)] or [""]
                pred = preds.get(qa["id"])
                if pred is None:
                    em_of[qa["id"]], f1_of[qa["id"]] = 0.0, 0.0
                    continue
                em_of[qa["id"]] = max(float(normalize(pred) == normalize(g)) for g in golds)
                f1_of[qa["id"]] = max(f1(pred, g, v2) for g in golds)
    n = len(em_of)
    if not v2:
        print(json.dumps({"exact_match": 100 * sum(em_of.values()) / n, "f1": 100 * sum(f1_of.values()) / n}))
        return
    # exact/f1 with no-answer scores: above NA_THRESH the question counts as answered "".
    cut = {k: (float(not has[k]) if na is not None and na.get(k, 0.0) > NA_THRESH else None) for k in em_of}
    em_cut = {k: em_of[k] if cut[k] is None else cut[k] for k in em_of}
    f1_cut = {k: f1_of[k] if cut[k] is None else cut[k] for k in em_of}
    out = {"exact": 100 * sum(em_cut.values()) / n, "f1": 100 * sum(f1_cut.values()) / n, "total": n}
    for name, want in (("HasAns", True), ("NoAns", False)):
        ids = [k for k in em_of if has[k] == want]
        if ids:
            out[name + "_exact"] = 100 * sum(em_cut[k] for k in ids) / len(ids)
            out[name + "_f1"] = 100 * sum(f1_cut[k] for k in ids) / len(ids)
            out[name + "_total"] = len(ids)
    if na is not None:
        order = sorted(em_of, key=lambda k: na.get(k, 0.0))
        for name, raw in (("exact", em_of), ("f1", f1_of)):
            score = best = sum(1 for k in em_of if not has[k])
            thresh = 0.0
            for k in order:
                score += raw[k] if has[k] else (-1.0 if preds.get(k) else 0.0)
                if score > best:
                    best, thresh = score, na.get(k, 0.0)
            out["best_" + name] = 100 * best / n
            out["best_" + name + "_thresh"] = thresh
    print(json.dumps(out))


if __name__ == "__main__":
    main()
