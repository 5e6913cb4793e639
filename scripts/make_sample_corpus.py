#!/usr/bin/env python3
"""Writes data/sample/corpus.txt: a small English corpus generated from a grammar.

The demo and the tests pretrain on it, so it must be (1) our own text, (2) small, and
(3) learnable: masked words are predictable from context because the grammar ties them
together -- number agreement (the dog runs / the dogs run), verbs that take only certain
objects (drinks water, reads a book), adjectives that suit their nouns, fixed phrases
(in the morning), and documents that stay on one topic and reuse their characters.

Deterministic: the same seed gives byte-identical output.
Usage: python3 scripts/make_sample_corpus.py [--docs N] [--seed S] [--out PATH]
"""
import argparse
import random
from pathlib import Path

TOPICS = {
    "farm": {
        "people": ["farmer", "shepherd", "miller", "gardener"],
        "animals": ["cow", "horse", "goat", "sheep", "hen"],
        "things": [("apple", "red"), ("basket", "heavy"), ("field", "green"), ("barn", "old"), ("fence", "wooden")],
        "places": ["the farm", "the barn", "the meadow", "the orchard"],
        "acts": [("feeds", "feed", "the animals"), ("milks", "milk", "the cow"), ("plants", "plant", "the seeds"),
                 ("harvests", "harvest", "the wheat"), ("repairs", "repair", "the fence")],
    },
    "school": {
        "people": ["teacher", "student", "pupil", "librarian"],
        "animals": ["cat", "bird", "fish"],
        "things": [("book", "thick"), ("pencil", "sharp"), ("desk", "small"), ("map", "large"), ("lesson", "long")],
        "places": ["the school", "the library", "the classroom", "the hall"],
        "acts": [("reads", "read", "a book"), ("writes", "write", "a letter"), ("draws", "draw", "a map"),
                 ("studies", "study", "the lesson"), ("answers", "answer", "the question")],
    },
    "sea": {
        "people": ["sailor", "fisherman", "captain", "diver"],
        "animals": ["fish", "crab", "gull", "seal", "whale"],
        "things": [("boat", "small"), ("net", "wet"), ("wave", "high"), ("rope", "long"), ("shell", "white")],
        "places": ["the harbour", "the beach", "the island", "the ship"],
        "acts": [("sails", "sail", "the boat"), ("catches", "catch", "a fish"), ("pulls", "pull", "the net"),
                 ("ties", "tie", "the rope"), ("cleans", "clean", "the deck")],
    },
    "city": {
        "people": ["baker", "driver", "doctor", "painter", "merchant"],
        "animals": ["dog", "pigeon", "cat"],
        "things": [("bread", "fresh"), ("car", "fast"), ("street", "busy"), ("shop", "bright"), ("bridge", "stone")],
        "places": ["the market", "the station", "the hospital", "the bakery"],
        "acts": [("bakes", "bake", "the bread"), ("drives", "drive", "the bus"), ("visits", "visit", "the patient"),
                 ("paints", "paint", "the wall"), ("sells", "sell", "the fruit")],
    },
}
NAMES = ["anna", "ben", "clara", "david", "emma", "felix", "grace", "henry", "iris", "jonas", "kate", "leo", "maya",
         "noah", "olga", "paul", "rosa", "sam", "tara", "victor"]
TIMES = ["in the morning", "in the evening", "at night", "after lunch", "before dinner", "on monday", "on sunday",
         "every day", "in the summer", "in the winter"]
WEATHER = [("the sun", "shines", "warm"), ("the rain", "falls", "wet"), ("the wind", "blows", "cold"),
           ("the snow", "falls", "white")]
NUMBERS = ["two", "three", "four", "five", "six", "seven"]
IRREGULAR_PLURAL = {"sheep": "sheep", "fish": "fish", "person": "people"}


def plural(noun):
    if noun in IRREGULAR_PLURAL:
        return IRREGULAR_PLURAL[noun]
    if noun.endswith(("s", "sh", "ch", "x")):
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    if noun.endswith("f"):
        return noun[:-1] + "ves"
    return noun + "s"


def article(word):
    return "an" if word[0] in "aeiou" else "a"


class Doc:
    """One document: a topic plus a small cast that its sentences keep returning to."""

    def __init__(self, rng, topic):
        self.rng = rng
        self.t = TOPICS[topic]
        self.name = rng.choice(NAMES)
        self.friend = rng.choice([n for n in NAMES if n != self.name])
        self.job = rng.choice(self.t["people"])
        self.place = rng.choice(self.t["places"])

    def sentence(self):
        r, t = self.rng, self.t
        kind = r.randrange(9)
        if kind == 0:
            return f"{self.name} is {article(self.job)} {self.job} who works at {self.place} ."
        if kind == 1:
            third, _, obj = r.choice(t["acts"])
            return f"{self.name} {third} {obj} {r.choice(TIMES)} ."
        if kind == 2:
            _, base, obj = r.choice(t["acts"])
            return f"{self.name} and {self.friend} {base} {obj} together ."
        if kind == 3:
            noun, adj = r.choice(t["things"])
            n = r.choice(NUMBERS)
            return f"there are {n} {adj} {plural(noun)} at {self.place} ."
        if kind == 4:
            noun, adj = r.choice(t["things"])
            return f"the {noun} at {self.place} is very {adj} ."
        if kind == 5:
            animal = r.choice(t["animals"])
            if r.random() < 0.5:
                return f"the {animal} sleeps near {self.place} while {self.name} works ."
            return f"the {plural(animal)} sleep near {self.place} while {self.name} works ."
        if kind == 6:
            subj, verb, adj = r.choice(WEATHER)
            return f"{subj} {verb} and the day is {adj} ."
        if kind == 7:
            third, _, obj = r.choice(t["acts"])
            return f"{self.friend} asks {self.name} why {self.name} {third} {obj} ."
        noun, adj = r.choice(t["things"])
        return f"{self.name} gives {self.friend} {article(adj)} {adj} {noun} at {self.place} ."


def make_corpus(docs, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(docs):
        doc = Doc(rng, rng.choice(sorted(TOPICS)))
        out.append("\n".join(doc.sentence() for _ in range(rng.randint(6, 14))))
    return "\n\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=2500)
    ap.add_argument("--seed", type=int, default=20201022)
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "data" / "sample" / "corpus.txt"))
    args = ap.parse_args()
    text = make_corpus(args.docs, args.seed)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out} ({len(text.encode())} bytes, {args.docs} documents, {len(text.split())} words)")


if __name__ == "__main__":
    main()
