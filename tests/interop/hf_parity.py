#!/usr/bin/env python3
"""Parity of rpe-train's BERT with Hugging Face transformers 4.x BertForMaskedLM.

For absolute, shaw (HF relative_key) and m4 (HF relative_key_query):
  export: a random rpe-train model -> `rpe-train export-hf` -> transformers loads it
          (no missing/unexpected keys) -> MLM logits equal ours within TOL;
  import: a random transformers model (every tensor random) -> save_pretrained ->
          `rpe-train import-hf` -> our logits equal transformers' within TOL;
  round trip: that import exported again holds byte-identical tensors (all but the
          position_embeddings table HF keeps, unused, for relative types).
  clipped: shaw and m4 clipped at k < n - 1 export as HF's full table (edge rows repeated):
          transformers' logits equal ours on a sequence longer than k, and the folder
          imported (as an unclipped model) and exported again is byte-identical.
  SentencePiece: a model of a SentencePiece-tokenized run -> export-hf -> AutoTokenizer loads
          the folder (its special tokens are the pieces at their ids: <unk>, not a missing
          [UNK]) and maps an unknown word to the unk id, inside the vocabulary.
Our logits come from the test-only tool hf_probe. transformers 5 removed the relative
types, so this needs transformers>=4.40,<5. Exit 77 (ctest skip) when it is missing.
"""
import argparse
import json
import pathlib
import subprocess
import sys

TOL = 1e-4
METHODS = {"absolute": "absolute", "shaw": "relative_key", "m4": "relative_key_query"}

try:
    import torch
    import transformers
    from safetensors.torch import load_file
    from transformers import BertConfig, BertForMaskedLM
except ImportError as e:  # pragma: no cover - environment dependent
    print(f"SKIP: {e} (pip install 'transformers>=4.40,<5')")
    sys.exit(77)
if int(transformers.__version__.split(".")[0]) >= 5:
    print(f"SKIP: transformers {transformers.__version__} has no relative_key types (need <5)")
    sys.exit(77)


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAILED ({r.returncode}): {' '.join(map(str, cmd))}\n{r.stdout}{r.stderr}")
    return r.stdout


def our_logits(probe, checkpoint, ids):
    out = run([probe, "logits", checkpoint, ",".join(map(str, ids))])
    return torch.tensor(json.loads(out)["logits"], dtype=torch.float64)


def hf_logits(folder, ids):
    model, info = BertForMaskedLM.from_pretrained(folder, output_loading_info=True, attn_implementation="eager")
    missing = [k for k in info["missing_keys"] if k != "cls.predictions.decoder.weight"]
    if missing or info["unexpected_keys"] or info["mismatched_keys"]:
        raise SystemExit(f"transformers loading {folder}: {info}")
    model.eval()
    with torch.no_grad():
        x = torch.tensor([ids])
        return model(input_ids=x, attention_mask=torch.ones_like(x)).logits[0].double()


def random_hf_model(pet, folder, seed):
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=24, position_embedding_type=pet)
    model = BertForMaskedLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():  # random everywhere, LayerNorms and biases included
            norm = "LayerNorm.weight" in name
            p.normal_(1.0 if norm else 0.0, 0.2 if norm else 0.1)
    model.save_pretrained(folder)  # model.safetensors + config.json
    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    (folder / "vocab.txt").write_text("".join(f"{special[i] if i < 5 else f'w{i}'}\n" for i in range(50)))
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))


def sentencepiece_export_loads(rpe_train, probe, work):
    """True when the folder exported from a SentencePiece run works with AutoTokenizer."""
    from transformers import AutoTokenizer
    d = work / "sentencepiece"
    d.mkdir(parents=True, exist_ok=True)
    words = ["the", "cat", "sat", "on", "mat", "dog", "ran", "to", "a", "house", "big", "red", "and", "it", "was"]
    lines = [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(12)) for i in range(400)]
    (d / "corpus.txt").write_text("\n".join(lines) + "\n")
    run([probe, "init-sp", "m4", d / "run" / "model.pt", d / "corpus.txt"])
    run([rpe_train, "export-hf", d / "run" / "model.pt", "--out", d / "hf", "--overwrite"])
    vocab_size = json.loads((d / "hf" / "config.json").read_text())["vocab_size"]
    try:
        tok = AutoTokenizer.from_pretrained(d / "hf")
        ids = tok("the cat sat on the qqzx mat")["input_ids"]
    except Exception as e:  # transformers 4.x: "WordPiece error: Missing [UNK] token from the vocabulary"
        print(f"sentencepiece export: AutoTokenizer cannot load or use it: {e!r}")
        return False
    model = BertForMaskedLM.from_pretrained(d / "hf").eval()
    with torch.no_grad():
        model(input_ids=torch.tensor([ids]))
    ok = max(ids) < vocab_size and tok.unk_token_id in ids
    print(f"sentencepiece export: {type(tok).__name__} unk {tok.unk_token!r} = {tok.unk_token_id}, ids {ids}"
          f"{'' if ok else '  FAIL'}")
    return ok


def clipped_exports_match(rpe_train, probe, work, ids):
    """True when clipped shaw/m4 models export exactly (see the module's docstring)."""
    ok = True
    for i, (method, k) in enumerate([("shaw", 3), ("m4", 5)]):
        d = work / f"{method}_k{k}"
        ck = d / "ours" / "model.pt"
        ck.parent.mkdir(parents=True, exist_ok=True)
        run([probe, "init", method, ck, 40 + i, k])
        run([rpe_train, "export-hf", ck, "--out", d / "exported", "--overwrite"])
        diff = (our_logits(probe, ck, ids) - hf_logits(d / "exported", ids)).abs().max().item()
        run([rpe_train, "import-hf", d / "exported", "--out", d / "imported" / "model.pt", "--overwrite"])
        run([rpe_train, "export-hf", d / "imported" / "model.pt", "--out", d / "roundtrip", "--overwrite"])
        a, b = load_file(d / "exported" / "model.safetensors"), load_file(d / "roundtrip" / "model.safetensors")
        same = set(a) == set(b) and all(torch.equal(a[t], b[t]) for t in a)
        good = diff < TOL and same
        ok &= good
        print(f"{method} k={k}: export max|diff| {diff:.3e}, import -> export "
              f"{'identical' if same else 'DIFFERENT'}{'' if good else '  FAIL'}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rpe-train", required=True)
    ap.add_argument("--probe", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    work = pathlib.Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    registered = run([args.probe, "methods"]).split()
    ids = [2, 17, 5, 44, 9, 9, 31, 4, 12, 48, 7, 3, 25, 6, 39, 11, 20, 3, 0, 1]  # 20 <= max_position 24
    print(f"transformers {transformers.__version__}, torch {torch.__version__}; tolerance {TOL}")
    print(f"{'method':9} {'HF type':19} {'export max|diff|':>17} {'import max|diff|':>17}  round trip")
    failed, skipped = False, []
    for i, (method, pet) in enumerate(METHODS.items()):
        if method not in registered:
            skipped.append(method)
            print(f"{method:9} {pet:19} {'SKIP (method not registered in this build)':>37}")
            continue
        d = work / method
        # export: ours -> HF
        ours_ck = d / "ours" / "model.pt"
        ours_ck.parent.mkdir(parents=True, exist_ok=True)
        run([args.probe, "init", method, ours_ck, 10 + i])
        run([args.rpe_train, "export-hf", ours_ck, "--out", d / "exported", "--overwrite"])  # the folder outlives a run
        export_diff = (our_logits(args.probe, ours_ck, ids) - hf_logits(d / "exported", ids)).abs().max().item()
        # import: HF -> ours
        hf_dir = d / "hf"
        random_hf_model(pet, hf_dir, 20 + i)
        imported = d / "imported" / "model.pt"
        run([args.rpe_train, "import-hf", hf_dir, "--out", imported, "--overwrite"])  # the folder outlives a run
        import_diff = (our_logits(args.probe, imported, ids) - hf_logits(hf_dir, ids)).abs().max().item()
        # round trip: import -> export keeps every tensor byte for byte
        run([args.rpe_train, "export-hf", imported, "--out", d / "roundtrip", "--overwrite"])
        a, b = load_file(hf_dir / "model.safetensors"), load_file(d / "roundtrip" / "model.safetensors")
        unused = {"bert.embeddings.position_embeddings.weight"} if method != "absolute" else set()
        keys_a, keys_b = set(a) - unused, set(b) - unused
        same = keys_a == keys_b and all(a[k].dtype == b[k].dtype and torch.equal(a[k], b[k]) for k in keys_a)
        ok = export_diff < TOL and import_diff < TOL and same
        failed |= not ok
        print(f"{method:9} {pet:19} {export_diff:17.3e} {import_diff:17.3e}  "
              f"{'identical' if same else 'DIFFERENT'} ({len(keys_a)} tensors){'' if ok else '  FAIL'}")
    if "shaw" in registered and "m4" in registered:
        failed |= not clipped_exports_match(args.rpe_train, args.probe, work, ids)
    failed |= not sentencepiece_export_loads(args.rpe_train, args.probe, work)
    if skipped:
        print(f"skipped (not registered in this build): {', '.join(skipped)}")
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
