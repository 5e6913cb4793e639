#!/usr/bin/env python3
"""Hugging Face BertForMaskedLM training throughput, the baseline of rpe-bench-model.

Same step as rpe-bench-model (bench/model_bench.cpp): random packed batches of
--batch-tokens tokens, MLM loss on 15% of positions, backward, AdamW, bf16 autocast,
dropout 0.1, median of --steps timed steps after --warmup (--max-seconds caps them, at
least 3). One JSON line per
(position type, length):
  {"impl": "hf", "method": "absolute-sdpa" | "relative_key" | "relative_key_query", ...}
absolute runs with attn_implementation="sdpa"; the relative types only exist in eager
attention, and only in transformers 4.x (5.x removed them: bring a 4.x wheel, e.g.
pip install 'transformers>=4.40,<5'). Exit code 77 when transformers is missing.
--head masked (default) applies HF's own MLM head (model.cls) to the masked positions only,
as rpe-train does: the stock forward(labels=...) runs it on every token, ~22% more matmul
work at BERT-base and a [tokens, vocab] logits tensor (GBs), which would make the comparison
one of heads rather than of attention. --head all measures the stock model. The row's "head"
says which; AdamW is fused where the device has the kernel, as on rpe-train's side.
"""
import argparse
import json
import sys
import time


def measure(args, torch, transformers, kind, length, head):
    device = torch.device(args.device)
    torch.manual_seed(0)
    position_type = "absolute" if kind == "absolute-sdpa" else kind
    config = transformers.BertConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, intermediate_size=args.ffn,
        max_position_embeddings=max(512, length), position_embedding_type=position_type)
    impl = "sdpa" if kind == "absolute-sdpa" else "eager"
    model = transformers.BertForMaskedLM._from_config(config, attn_implementation=impl).to(device)
    model.train()
    fused = device.type == "cuda"  # rpe-train's training step uses the fused AdamW kernel there
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=fused)
    batch = max(1, args.batch_tokens // length)
    ids = torch.randint(5, args.vocab, (batch, length), device=device)
    labels = torch.full((batch, length), -100, device=device)
    n = max(1, batch * length * 15 // 100)
    pick = torch.randperm(batch * length, device=device)[:n]
    labels.view(-1)[pick] = torch.randint(5, args.vocab, (n,), device=device)
    targets = labels.view(-1)[pick]

    def loss_of_batch():
        if head == "all":
            return model(input_ids=ids, labels=labels).loss
        hidden = model.bert(input_ids=ids).last_hidden_state  # [B, L, D]
        logits = model.cls(hidden.reshape(-1, hidden.shape[-1])[pick])  # [n, V]: masked rows only
        return torch.nn.functional.cross_entropy(logits.float(), targets)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=not args.fp32):
            loss = loss_of_batch()
        loss.backward()
        opt.step()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    for _ in range(args.warmup):
        step()
    sync()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for i in range(args.steps):
        if args.max_seconds > 0 and i >= 3 and sum(times) > args.max_seconds:
            break  # as rpe-bench-model: a slow case stops after --max-seconds (at least 3 steps)
        t0 = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t0)
    times.sort()
    med = times[len(times) // 2]
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else 0.0
    return {"impl": "hf", "method": kind, "head": head, "length": length, "batch": batch,
            "tokens_per_s": batch * length / med, "peak_mib": peak, "step_ms": med * 1000,
            "hidden": args.hidden, "layers": args.layers, "heads": args.heads, "ffn": args.ffn,
            "vocab": args.vocab, "bf16": not args.fp32, "transformers": transformers.__version__,
            "steps": len(times)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kinds", default="absolute-sdpa,relative_key,relative_key_query")
    p.add_argument("--lengths", default="128,512")
    p.add_argument("--device", default="cuda")
    p.add_argument("--batch-tokens", type=int, default=16384)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--ffn", type=int, default=3072)
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--max-seconds", type=float, default=0, help="cap a case's timed steps (at least 3); 0: none")
    p.add_argument("--fp32", action="store_true")
    p.add_argument("--head", default="masked", help="masked | all | masked,all (see above)")
    args = p.parse_args()
    try:
        import torch
        import transformers
    except ImportError as e:
        print(f"hf_bench: {e} (pip install 'transformers>=4.40,<5')", file=sys.stderr)
        return 77
    if not transformers.__version__.startswith("4."):
        print(f"hf_bench: transformers {transformers.__version__} has no relative_key types; need 4.x",
              file=sys.stderr)
        return 77
    heads = args.head.split(",")
    if not heads or any(h not in ("masked", "all") for h in heads):
        print(f"hf_bench: --head must be masked, all or masked,all, not '{args.head}'", file=sys.stderr)
        return 2
    for length in (int(x) for x in args.lengths.split(",")):
        for kind in args.kinds.split(","):
            for head in heads:
                print(json.dumps(measure(args, torch, transformers, kind, length, head)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
