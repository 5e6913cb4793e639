#!/usr/bin/env python3
"""Writes small SQuAD-format (v1.1, v2.0) and GLUE-format samples under data/sample/.

Same idea as make_sample_corpus.py (whose grammar it reuses): our own text from a small
grammar, so questions are answerable from the context and labels follow from the facts.
  data/sample/squad/{train,dev}-v1.1.json     official SQuAD 1.1 layout
  data/sample/squad2/{train,dev}-v2.0.json    SQuAD 2.0 layout (is_impossible, answers [])
  data/sample/glue/<TASK>/{train,dev}.tsv     the nine GLUE tasks in the release layout
                                              (CoLA without header and final newline, MRPC
                                              header with a BOM, MNLI dev_matched/mismatched)
Deterministic: the same seed gives byte-identical output.
Usage: python3 scripts/make_sample_squad.py [--seed S] [--out DIR]
"""
import argparse
import json
import random
from pathlib import Path

from make_sample_corpus import NAMES, NUMBERS, TIMES, TOPICS, article, plural


def paragraph(rng):
    """A short paragraph plus (question, answer text, occurrence sentence index) facts."""
    topic = TOPICS[rng.choice(sorted(TOPICS))]
    name, friend = rng.sample(NAMES, 2)
    job, place = rng.choice(topic["people"]), rng.choice(topic["places"])
    third, base, obj = rng.choice(topic["acts"])
    time = rng.choice(TIMES)
    noun, adj = rng.choice(topic["things"])
    number = rng.choice(NUMBERS)
    animal = rng.choice(topic["animals"])
    gift_noun, gift_adj = rng.choice([t for t in topic["things"] if t[0] != noun])
    sents = [
        (f"{name.capitalize()} is {article(job)} {job} who works at {place}.",
         [(f"Where does {name.capitalize()} work?", place), (f"What is {name.capitalize()}'s job?", job)]),
        (f"{name.capitalize()} {third} {obj} {time}.", [(f"When does {name.capitalize()} {base} {obj}?", time)]),
        (f"There are {number} {adj} {plural(noun)} at {place}.",
         [(f"How many {adj} {plural(noun)} are there?", number)]),
        (f"The {animal} sleeps near {place} while {name.capitalize()} works.",
         [(f"Which animal sleeps near {place}?", animal)]),
        (f"{name.capitalize()} gives {friend.capitalize()} {article(gift_adj)} {gift_adj} {gift_noun}.",
         [(f"Who receives the {gift_noun} from {name.capitalize()}?", friend.capitalize()),
          (f"What does {name.capitalize()} give to {friend.capitalize()}?", f"{article(gift_adj)} {gift_adj} {gift_noun}")]),
    ]
    rng.shuffle(sents)
    context, qas = "", []
    for sent, facts in sents:
        start = len(context) + (1 if context else 0)
        context = (context + " " + sent) if context else sent
        for q, a in facts:
            qas.append((q, a, start + sent.index(a)))
    others = [n for n in NAMES if n not in (name, friend)]
    impossible = [f"Where does {rng.choice(others).capitalize()} work?",
                  f"When does {rng.choice(others).capitalize()} {base} {obj}?"]
    return context, qas, impossible


FILLER = ["The {noun} was {adj} that day, and nobody said much about it.",
          "Later the {adj} {noun} was moved to another room for a while.",
          "Some people think the {noun} looks {adj}, but others do not agree.",
          "It rained for a short time in the afternoon, then the sky was clear again.",
          "Everyone talked about the {adj} {noun} over lunch and again at dinner.",
          "The old {noun} stayed where it was, as it had for many years."]


def filler(frng, sentences):
    """Neutral sentences (no names, places, times, numbers or animals): they lengthen a context
    without adding a second answer to any question."""
    out = []
    for _ in range(sentences):
        noun, adj = frng.choice(TOPICS[frng.choice(sorted(TOPICS))]["things"])
        out.append(frng.choice(FILLER).format(noun=noun, adj=adj))
    return " ".join(out)


def lengthen(context, qas, key):
    """Every third paragraph is padded to 200-300 words, facts in the middle, so that at the
    tiny scale some windows run past a 128-token pretraining length (Table 4/5, extrapolation).
    Its own seeded generator keeps the main one, and every other file, unchanged."""
    frng = random.Random(key)
    before, after = filler(frng, frng.randint(8, 12)), filler(frng, frng.randint(8, 12))
    shift = len(before) + 1
    return f"{before} {context} {after}", [(q, a, start + shift) for q, a, start in qas]


def squad(rng, paragraphs, v2, prefix):
    data, qid = [], 0
    for p in range(paragraphs):
        context, qas, impossible = paragraph(rng)
        if p % 3 == 2:
            context, qas = lengthen(context, qas, f"{prefix}{p}")
        items = []
        for q, a, start in qas:
            assert context[start:start + len(a)] == a
            item = {"answers": [{"answer_start": start, "text": a}], "question": q, "id": f"{prefix}{qid:06d}"}
            if v2:
                item["is_impossible"] = False
            items.append(item)
            qid += 1
        if v2:
            for q in impossible[:1]:
                items.append({"answers": [], "question": q, "id": f"{prefix}{qid:06d}", "is_impossible": True})
                qid += 1
        data.append({"title": f"sample_{p}", "paragraphs": [{"context": context, "qas": items}]})
    return {"data": data, "version": "v2.0" if v2 else "1.1"}


POSITIVE = ["fresh", "bright", "warm", "green", "clean", "fast"]
NEGATIVE = ["old", "wet", "heavy", "broken", "cold", "dull"]


def fact(rng):
    topic = TOPICS[rng.choice(sorted(TOPICS))]
    return rng.choice(NAMES).capitalize(), rng.choice(topic["people"]), rng.choice(topic["places"]), topic


def glue(rng, n):
    """Rows of every task (train/dev share the generator; labels follow from the facts)."""
    t = {k: [] for k in ["CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI", "QNLI", "RTE", "WNLI"]}
    for i in range(n):
        name, job, place, topic = fact(rng)
        third, base, obj = rng.choice(topic["acts"])
        # CoLA: number agreement decides acceptability.
        ok = rng.random() < 0.6
        verb = third if ok else base
        t["CoLA"].append(["smp", "1" if ok else "0", "" if ok else "*", f"{name} {verb} {obj} ."])
        # SST-2: the adjective's polarity decides the label.
        pos = rng.random() < 0.5
        noun = rng.choice(topic["things"])[0]
        t["SST-2"].append([f"the {noun} at {place} is {rng.choice(POSITIVE if pos else NEGATIVE)} ", "1" if pos else "0"])
        # Pair tasks: a paraphrase of the same fact vs a different fact.
        s1 = f"{name} works as {article(job)} {job} at {place} ."
        same = rng.random() < 0.5
        other_place = rng.choice([p for p in topic["places"] if p != place])
        s2 = f"{name} is {article(job)} {job} who works at {place} ." if same else f"{name} works at {other_place} ."
        t["MRPC"].append(["1" if same else "0", str(1000 + i), str(2000 + i), s1, s2])
        t["QQP"].append([str(i), str(2 * i), str(2 * i + 1), f"where does {name} work as {article(job)} {job} ?",
                         f"at which place does {name} work ?" if same else f"what does {name} {base} ?",
                         "1" if same else "0"])
        score = 5.0 if same else round(rng.uniform(0.0, 2.5), 3)
        t["STS-B"].append([str(i), "main-captions", "sample", "2026", str(i), "none", "none", s1, s2, f"{score:.3f}"])
        kind = rng.choice(["entailment", "contradiction", "neutral"])
        hyp = {"entailment": f"{name} works at {place} .", "contradiction": f"{name} works at {other_place} .",
               "neutral": f"{name} likes {obj} ."}[kind]
        t["MNLI"].append([str(i), str(i), f"{i}e", "fiction", "(x)", "(y)", "(x)", "(y)", s1, hyp, kind, kind])
        ent = rng.random() < 0.5
        t["QNLI"].append([str(i), f"Where does {name} work?", s1 if ent else f"{name} {third} {obj} .",
                          "entailment" if ent else "not_entailment"])
        t["RTE"].append([str(i), s1, f"{name} works at {place} ." if ent else f"{name} works at {other_place} .",
                         "entailment" if ent else "not_entailment"])
        t["WNLI"].append([str(i), f"{name} sees the {job} because he is at {place} .",
                          f"The {job} is at {place} ." if ent else f"{name} is at {other_place} .", "1" if ent else "0"])
    return t


HEADERS = {
    "SST-2": ["sentence", "label"],
    "MRPC": ["\ufeffQuality", "#1 ID", "#2 ID", "#1 String", "#2 String"],
    "STS-B": ["index", "genre", "filename", "year", "old_index", "source1", "source2", "sentence1", "sentence2", "score"],
    "QQP": ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
    "MNLI": ["index", "promptID", "pairID", "genre", "sentence1_binary_parse", "sentence2_binary_parse",
             "sentence1_parse", "sentence2_parse", "sentence1", "sentence2", "label1", "gold_label"],
    "QNLI": ["index", "question", "sentence", "label"],
    "RTE": ["index", "sentence1", "sentence2", "label"],
    "WNLI": ["index", "sentence1", "sentence2", "label"],
}


def write_tsv(path, header, rows, final_newline=True):
    lines = (["\t".join(header)] if header else []) + ["\t".join(r) for r in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + ("\n" if final_newline else ""), encoding="utf-8")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=20201023)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "data" / "sample"))
    args = ap.parse_args()
    out = Path(args.out)
    rng = random.Random(args.seed)
    for sub, v2, name in [("squad", False, "v1.1"), ("squad2", True, "v2.0")]:
        for split, n in [("train", 240), ("dev", 40)]:
            doc = squad(rng, n, v2, f"{sub}-{split}-")
            path = out / sub / f"{split}-{name}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(doc) + "\n", encoding="utf-8")
            print(f"wrote {path} ({sum(len(p['qas']) for a in doc['data'] for p in a['paragraphs'])} questions)")
    for split, n in [("train", 200), ("dev", 48)]:
        rows = glue(rng, n)
        for task, r in rows.items():
            folder = out / "glue" / task
            if task == "MNLI" and split == "dev":
                half = len(r) // 2
                dev_header = HEADERS["MNLI"][:-1] + ["label2", "label3", "label4", "label5", "gold_label"]
                widen = lambda row: row[:-1] + [row[-2]] * 4 + [row[-1]]
                write_tsv(folder / "dev_matched.tsv", dev_header, [widen(x) for x in r[:half]])
                write_tsv(folder / "dev_mismatched.tsv", dev_header, [widen(x) for x in r[half:]])
                continue
            write_tsv(folder / f"{split}.tsv", HEADERS.get(task), r, final_newline=not (task == "CoLA" and split == "dev"))
    print(f"wrote {out / 'glue'} (9 tasks)")


if __name__ == "__main__":
    main()
