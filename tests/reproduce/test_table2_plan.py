#!/usr/bin/env python3
"""ctest table2_plan: bench/table2_plan.py against a plan worked out by hand.

Two methods measured at the pretraining batch (absolute: 100 ms/step; m4: 300 ms) and at the
fine-tuning batch of 2 windows (absolute: 50 ms, 2,000 tokens/s; m4: 100 ms, 1,000 tokens/s), a
SQuAD file of one paragraph of 100 words and two questions of 10 words as train and dev, L = 128:
  windows per question: c = 1.3 * 100 = 130, q = ceil(1.3 * 10) = 13, room = 128 - 13 - 3 = 112,
                        1 + ceil((130 - 112) / 64) = 2  -> 4 train windows, 4 dev windows
  fine-tuning (2 epochs of 4 / 2 = 2 steps, a dev pass after each):
                                 absolute 4 * 0.05 + 2 * 4*128/(3*2000) = 0.370667 s
                                 m4       4 * 0.1  + 2 * 4*128/(3*1000) = 0.741333 s
  fixed = (20 + 0.370667 + 20) + (20 + 0.741333 + 20) = 81.112 s
  budget 1000 s, 16 s spent: (1000 - 16 - 81.112) / (0.1 + 0.3) = 2257.22 -> 2257 steps
                             (1 epoch would buy 2258, fixed 80.556 s: not 1.5 x 2257, the 2 epochs stay)
  budget 100 s: 7 steps < 200 -> refused, "at least ceil((16 + 81.112 + 200 * 0.4) / 60) = 3 minutes"
  --squad-train-examples 1: train = the first question's 2 windows (dev stays 4), 1 step an epoch:
                                 absolute 2 * 0.05 + 0.170667 = 0.270667 s, m4 2 * 0.1 + 0.341333 = 0.541333 s
Slow fine-tuning (absolute 20 s a step, m4 40 s; tokens/s as above), where a second epoch costs
the pretraining most of its steps:
  2 epochs: absolute 4 * 20 + 0.170667, m4 4 * 40 + 0.341333, fixed 320.512 s
  1 epoch:  absolute 2 * 20 + 0.085333, m4 2 * 40 + 0.170667, fixed 200.256 s
  budget 500 s: 2 epochs (484 - 320.512) / 0.4 = 408 steps, 1 epoch (484 - 200.256) / 0.4 = 709
                -> 709 >= 1.5 * 408: 1 epoch, 709 steps
  budget 380 s: 2 epochs 108 steps (< 200, refused before), 1 epoch 409: 1 epoch
  budget 100 s: no step either way: refused, with no switch announced
"""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

root = Path(__file__).resolve().parents[2]
with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    words = lambda n: " ".join(["word"] * n)
    squad = {"data": [{"title": "t", "paragraphs": [{"context": words(100), "qas": [
        {"id": "a", "question": words(10), "answers": [{"text": "word", "answer_start": 0}]},
        {"id": "b", "question": words(10), "answers": [{"text": "word", "answer_start": 5}]}]}]}]}
    (tmp / "squad.json").write_text(json.dumps(squad))
    (tmp / "bench.jsonl").write_text(
        json.dumps({"method": "absolute", "step_ms": 100.0, "tokens_per_s": 1000.0}) + "\n" +
        json.dumps({"method": "m4", "step_ms": 300.0, "tokens_per_s": 500.0}) + "\n")
    (tmp / "bench_ft.jsonl").write_text(
        json.dumps({"method": "absolute", "step_ms": 50.0, "tokens_per_s": 2000.0}) + "\n" +
        json.dumps({"method": "m4", "step_ms": 100.0, "tokens_per_s": 1000.0}) + "\n")

    (tmp / "bench_ft_slow.jsonl").write_text(
        json.dumps({"method": "absolute", "step_ms": 20000.0, "tokens_per_s": 2000.0}) + "\n" +
        json.dumps({"method": "m4", "step_ms": 40000.0, "tokens_per_s": 1000.0}) + "\n")

    def plan(budget, *extra, ft="bench_ft.jsonl"):
        cmd = [sys.executable, str(root / "bench/table2_plan.py"), "--bench", str(tmp / "bench.jsonl"),
               "--bench-finetune", str(tmp / ft), "--finetune-batch", "2",
               "--squad-train", str(tmp / "squad.json"), "--squad-dev", str(tmp / "squad.json"),
               "--budget-s", str(budget), "--spent-s", "16", "--epochs", "2", "--out", str(tmp / "plan.json"), *extra]
        return subprocess.run(cmd, capture_output=True, text=True)

    r = plan(1000)
    assert r.returncode == 0, r.stderr
    p = json.loads((tmp / "plan.json").read_text())
    assert p["squad_windows"] == {"train": 4, "dev": 4}, p["squad_windows"]
    assert abs(p["per_method"]["absolute"]["finetune_s"] - 0.4) < 1e-9, p["per_method"]  # rounded to 0.1 s
    assert abs(p["per_method"]["m4"]["finetune_s"] - 0.7) < 1e-9, p["per_method"]
    assert (p["steps"], p["warmup_steps"], p["eval_every"], p["save_every"], p["log_every"]) == (2257, 225, 451, 451, 45), p
    assert p["methods"] == ["absolute", "m4"] and p["epochs"] == 2, p
    assert abs(p["estimated_s"] - (16 + 81.112 + 2257 * 0.4)) < 0.06, p["estimated_s"]
    (tmp / "plan.json").unlink()

    # --methods m4: the plan of m4 alone, fixed = 20 + 0.741333 + 20, (1000 - 16 - 40.741333) / 0.3 = 3144.2
    r = plan(1000, "--methods", "m4")
    assert r.returncode == 0, r.stderr
    p = json.loads((tmp / "plan.json").read_text())
    assert p["methods"] == ["m4"] and list(p["per_method"]) == ["m4"] and p["steps"] == 3144, p
    assert plan(1000, "--methods", "m4,rope").returncode != 0  # not measured
    (tmp / "plan.json").unlink()

    r = plan(1000, "--squad-train-examples", "1")
    assert r.returncode == 0, r.stderr
    p = json.loads((tmp / "plan.json").read_text())
    assert p["squad_windows"] == {"train": 2, "dev": 4} and p["squad_train_examples"] == 1, p
    assert abs(p["per_method"]["absolute"]["finetune_s"] - 0.3) < 1e-9, p["per_method"]
    assert abs(p["per_method"]["m4"]["finetune_s"] - 0.5) < 1e-9, p["per_method"]
    (tmp / "plan.json").unlink()

    # The pretraining first: a second fine-tuning epoch that costs it most of its steps is dropped.
    for budget, steps in ((500, 709), (380, 409)):
        r = plan(budget, ft="bench_ft_slow.jsonl")
        assert r.returncode == 0, r.stderr
        p = json.loads((tmp / "plan.json").read_text())
        assert p["epochs"] == 1 and p["steps"] == steps, (budget, p)
        assert p["per_method"]["absolute"]["finetune_s"] == 40.1 and p["per_method"]["m4"]["finetune_s"] == 80.2, p
        assert "planning 1 epoch" in r.stdout, r.stdout
        (tmp / "plan.json").unlink()

    r = plan(100, ft="bench_ft_slow.jsonl")
    assert r.returncode != 0 and "planning 1 epoch" not in r.stdout and not (tmp / "plan.json").exists(), r

    r = plan(100)
    assert r.returncode != 0 and not (tmp / "plan.json").exists(), r
    assert "buys 7 steps per method, fewer than 200: give at least 3 minutes" in r.stderr, r.stderr
print("table2_plan: hand-computed plans match")
