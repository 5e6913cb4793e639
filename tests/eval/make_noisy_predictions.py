#!/usr/bin/env python3
"""Writes predictions (and no-answer scores) for a SQuAD file that exercise the scorer:
exact golds, case/punctuation/article variants, truncations, extra words, other answers,
empty strings, missing ids. Deterministic. Usage: DATASET OUT_PREDICTIONS OUT_NA_PROBS"""
import json
import random
import sys

rng = random.Random(7)
data = json.load(open(sys.argv[1], encoding="utf-8"))
qas = [qa for a in data["data"] for p in a["paragraphs"] for qa in p["qas"]]
all_answers = [a["text"] for qa in qas for a in qa["answers"]] or ["x"]
preds, na = {}, {}
for qa in qas:
    gold = rng.choice(qa["answers"])["text"] if qa["answers"] else ""
    words = gold.split()
    kind = rng.randrange(9)
    if kind == 0:
        pred = gold
    elif kind == 1:
        pred = "The " + gold.upper() + "!"
    elif kind == 2:
        pred = " ".join(words[: max(1, len(words) // 2)])
    elif kind == 3:
        pred = gold + " and the " + rng.choice(all_answers)
    elif kind == 4:
        pred = rng.choice(all_answers)
    elif kind == 5:
        pred = ""
    elif kind == 6:
        continue  # missing prediction
    elif kind == 7:
        pred = "a " + gold.replace(" ", "  ") + " ."
    else:
        pred = " ".join(reversed(words))
    preds[qa["id"]] = pred
    na[qa["id"]] = round(rng.uniform(-5, 5), 3)
json.dump(preds, open(sys.argv[2], "w", encoding="utf-8"))
json.dump(na, open(sys.argv[3], "w", encoding="utf-8"))
