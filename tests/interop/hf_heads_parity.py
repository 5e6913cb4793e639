#!/usr/bin/env python3
"""Parity of export-hf's fine-tuned models with transformers 4.x.

For absolute, shaw and m4 encoders with a SQuAD head (BertForQuestionAnswering) and GLUE heads
(BertForSequenceClassification: MNLI's 3 labels, STS-B's regression score): a random kept model
(`hf_probe init-finetuned`, every tensor random) -> `rpe-train export-hf MODEL_DIR` ->
transformers loads it with no missing or unexpected keys -> the head's logits on a sequence with
both token types equal ours (`hf_probe head-logits`) within TOL; id2label carries the task's
label names. Needs transformers>=4.40,<5 (the relative types); exit 77 (ctest skip) without.
Usage: hf_heads_parity.py --rpe-train BIN --probe BIN --workdir DIR
"""
import argparse
import json
import pathlib
import shutil
import sys

TOL = 1e-4
METHODS = ("absolute", "shaw", "m4")
TASKS = {"squad_v1": None, "mnli": ["contradiction", "entailment", "neutral"], "stsb": []}

# transformers 4.x or a ctest skip (exit 77), and run(): shared with the encoder's parity test.
from hf_parity import run  # noqa: E402
from transformers import BertForQuestionAnswering, BertForSequenceClassification  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rpe-train", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    work = pathlib.Path(a.workdir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ids = [2, 17, 9, 33, 3, 41, 12, 8, 3]   # [CLS] a a a [SEP] b b b [SEP]
    types = [0, 0, 0, 0, 0, 1, 1, 1, 1]
    worst = 0.0
    for method in METHODS:
        for task, labels in TASKS.items():
            model_dir, hf_dir = work / f"{method}_{task}", work / f"{method}_{task}_hf"
            run([a.probe, "init-finetuned", method, task, model_dir, "7"])
            run([a.rpe_train, "export-hf", model_dir, "--out", hf_dir])
            ours = torch.tensor(json.loads(run([a.probe, "head-logits", model_dir,
                                                ",".join(map(str, ids)), ",".join(map(str, types))]))["logits"],
                                dtype=torch.float64)
            cls = BertForQuestionAnswering if labels is None else BertForSequenceClassification
            model, info = cls.from_pretrained(hf_dir, output_loading_info=True, attn_implementation="eager")
            if info["missing_keys"] or info["unexpected_keys"] or info["mismatched_keys"]:
                raise SystemExit(f"{method} {task}: transformers loading {hf_dir}: {info}")
            model.eval()
            x, t = torch.tensor([ids]), torch.tensor([types])
            with torch.no_grad():
                out = model(input_ids=x, token_type_ids=t, attention_mask=torch.ones_like(x))
            if labels is None:
                theirs = torch.stack([out.start_logits[0], out.end_logits[0]], dim=-1).double()  # [L, 2]
            else:
                theirs = out.logits.double()  # [1, C]
                names = [model.config.id2label[i] for i in range(model.config.num_labels)]
                if labels and names != labels:
                    raise SystemExit(f"{method} {task}: id2label {names} != {labels}")
                if not labels and model.config.problem_type != "regression":
                    raise SystemExit(f"{method} {task}: problem_type {model.config.problem_type}")
            if theirs.shape != ours.shape:
                raise SystemExit(f"{method} {task}: shapes {tuple(theirs.shape)} vs ours {tuple(ours.shape)}")
            diff = (theirs - ours).abs().max().item()
            worst = max(worst, diff)
            print(f"{method:9s} {task:9s} {cls.__name__:30s} max |logit diff| {diff:.2e}")
            if not diff < TOL:
                raise SystemExit(f"{method} {task}: logits differ by {diff} (tolerance {TOL})")
    # Fine-tuned with finetune.token_types: false, our model saw type 0 everywhere; HF is fed
    # the tokenizer's types (1 on the second segment) and must still compute the same.
    model_dir, hf_dir = work / "absolute_mnli_notypes", work / "absolute_mnli_notypes_hf"
    run([a.probe, "init-finetuned", "absolute", "mnli", model_dir, "7", "no-token-types"])
    run([a.rpe_train, "export-hf", model_dir, "--out", hf_dir])
    ours = torch.tensor(json.loads(run([a.probe, "head-logits", model_dir, ",".join(map(str, ids)),
                                        ",".join("0" for _ in ids)]))["logits"], dtype=torch.float64)
    model = BertForSequenceClassification.from_pretrained(hf_dir, attn_implementation="eager").eval()
    with torch.no_grad():
        theirs = model(input_ids=torch.tensor([ids]), token_type_ids=torch.tensor([types])).logits.double()
    diff = (theirs - ours).abs().max().item()
    print(f"absolute  mnli      token_types: false, HF given types 0/1     max |logit diff| {diff:.2e}")
    if not diff < TOL:
        raise SystemExit(f"token_types false: HF with segment types differs from ours by {diff} (tolerance {TOL})")
    print(f"OK: {len(METHODS) * len(TASKS) + 1} fine-tuned exports match transformers {transformers.__version__} "
          f"(worst {max(worst, diff):.1e} < {TOL})")


if __name__ == "__main__":
    main()
