#!/usr/bin/env python3
"""rpe-train's DeBERTa position bias against Hugging Face transformers' DeBERTa attention: v1's
with clipped distances, v2's with log buckets (model.attention.position_buckets).

hf_probe deberta-bias gives a random DeBERTa layer's bias c2p + p2c for random q, k, with the
relative table P and the two projections. transformers' DisentangledSelfAttention is given the
same weights (pos_proj = P^K's projection, pos_q_proj = P^Q's, its bias zero) and the same q, k,
and its disentangled_att_bias must agree, term by term, at a length that no distance clips:

  c2p = q_i . P^K at distance i - j: equal to transformers';
  p2c = k_j . P^Q at distance j - i, the paper's delta(j, i) (He et al. 2020, eq. 4), which
        ../shared/docs/methods.md specifies: equal to transformers' p2c evaluated at the
        negated relative positions. Microsoft's code, which transformers ports, reads P^Q at
        i - j instead (checked here too, so that a change on either side shows), and so does
        ours with deberta_p2c: microsoft: equal to transformers' p2c as it is.

With log buckets (position_buckets b, max_relative k: transformers' position_buckets b and
max_relative_positions k + 1), DeBERTa v2's disentangled_attention_bias must agree the same way,
term by term, at lengths whose distances stay within k (beyond, ours has bucket +b where
transformers clamps to b - 1).

Exit 77 (ctest skip) without transformers 4.x.
"""
import argparse
import json
import math
import sys

# transformers 4.x or a ctest skip (exit 77), and run(): shared with the encoder's parity test.
from hf_parity import run  # noqa: E402
import torch  # noqa: E402
from transformers import DebertaConfig, DebertaV2Config  # noqa: E402
from transformers.models.deberta.modeling_deberta import DisentangledSelfAttention, build_relative_position  # noqa: E402
from transformers.models.deberta_v2 import modeling_deberta_v2 as v2  # noqa: E402

# fp64 on both sides, but transformers takes p2c's 1 / sqrt(3 d) in fp32 (scaled_size_sqrt): ~1e-8 apart
TOL = 1e-6


def ours(probe, seed, length, k, buckets=0, p2c="paper"):
    out = run([probe, "deberta-bias", seed, length, k, buckets, p2c])
    return {name: torch.tensor(t["data"], dtype=torch.float64).view(t["shape"]) for name, t in json.loads(out).items()}


def hf_term(kind, t, span):
    """transformers' attention with one position term (c2p or p2c) and our weights."""
    heads, hidden = t["q"].shape[1], t["rel_embeddings"].shape[1]
    cfg = DebertaConfig(hidden_size=hidden, num_attention_heads=heads, intermediate_size=2 * hidden,
                        relative_attention=True, max_relative_positions=span, pos_att_type=[kind],
                        max_position_embeddings=64)
    att = DisentangledSelfAttention(cfg).double().eval()
    with torch.no_grad():
        if kind == "c2p":  # ours: P @ W (W [D, D]); transformers' Linear: P @ weight^T
            att.pos_proj.weight.copy_(t["pos_key_proj"].T)
        else:
            att.pos_q_proj.weight.copy_(t["pos_query_proj"].T)
            att.pos_q_proj.bias.zero_()
    return att


def hf_v2_term(kind, t, buckets, k):
    """transformers' DeBERTa v2 attention with one position term, log buckets and our weights."""
    heads, hidden = t["q"].shape[1], t["rel_embeddings"].shape[1]
    cfg = DebertaV2Config(hidden_size=hidden, num_attention_heads=heads, intermediate_size=2 * hidden,
                          relative_attention=True, position_buckets=buckets, max_relative_positions=k + 1,
                          pos_att_type=[kind], share_att_key=False, max_position_embeddings=64)
    att = v2.DisentangledSelfAttention(cfg).double().eval()
    proj = att.pos_key_proj if kind == "c2p" else att.pos_query_proj
    with torch.no_grad():
        proj.weight.copy_(t["pos_key_proj" if kind == "c2p" else "pos_query_proj"].T)
        proj.bias.zero_()
    return att


def compare(what, bias, c2p, p2c_paper, p2c_code, failures, microsoft=None):
    """ours = transformers' c2p + p2c read at the paper's delta(j, i), and not at delta(i, j);
    `microsoft`, ours with deberta_p2c: microsoft from the same weights, the other way round."""
    diff = (bias - (c2p + p2c_paper)).abs().max().item()
    code_diff = (bias - (c2p + p2c_code)).abs().max().item()
    if microsoft is not None:
        ms = (microsoft - (c2p + p2c_code)).abs().max().item()
        print(f"{what}: deberta_p2c microsoft: |ours - (c2p + p2c at i - j)| = {ms:.3g}")
        if not ms <= TOL:
            failures.append(f"{what}: deberta_p2c microsoft differs from transformers' c2p + p2c by {ms}")
    print(f"{what}: |ours - (c2p + p2c at j - i)| = {diff:.3g}; "
          f"|ours - (c2p + p2c at i - j, Microsoft's code)| = {code_diff:.3g}")
    if not diff <= TOL:
        failures.append(f"{what}: ours differs from transformers' c2p + p2c(delta(j, i)) by {diff}")
    if not code_diff > 1e-3:
        failures.append(f"{what}: p2c no longer tells delta(j, i) from delta(i, j) ({code_diff})")


def check_buckets(probe, failures):
    """Log buckets ending at k, lengths up to k + 1 (no distance beyond k). 8 buckets to k = 6
    has a ratio of exactly 1 at |r| = k that an ulp either way moves into the next bucket."""
    for buckets, k, seed, length in ((8, 16, 3, 17), (8, 16, 4, 9), (8, 6, 5, 7), (4, 15, 6, 16)):
        t = ours(probe, seed, length, k, buckets)
        ms = ours(probe, seed, length, k, buckets, "microsoft")["bias"].reshape(t["q"].shape[1], length, length)
        heads, d = t["q"].shape[1], t["q"].shape[-1]
        q, key = (t[n].reshape(heads, length, d) for n in ("q", "k"))  # v2 takes [B*H, L, d]
        rel = t["rel_embeddings"][: 2 * buckets]  # transformers' 2b rows: buckets -b..b-1
        rel_pos = v2.build_relative_position(q, key, bucket_size=buckets, max_position=k + 1)  # [1, L, L]
        with torch.no_grad():
            c2p = hf_v2_term("c2p", t, buckets, k).disentangled_attention_bias(q, key, rel_pos, rel, 3)
            p2c_att = hf_v2_term("p2c", t, buckets, k)
            p2c_paper = p2c_att.disentangled_attention_bias(q, key, -rel_pos, rel, 3)
            p2c_code = p2c_att.disentangled_attention_bias(q, key, rel_pos, rel, 3)
        compare(f"v2, buckets {buckets}, k {k}, seed {seed}, L {length}", t["bias"].reshape(heads, length, length),
                c2p, p2c_paper, p2c_code, failures, ms)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--probe", required=True)
    args = ap.parse_args()
    span, failures = 8, []
    for seed, length in ((1, 7), (2, 5)):  # lengths <= span: no distance reaches a clipped end
        t = ours(args.probe, seed, length, span)
        ms = ours(args.probe, seed, length, span, 0, "microsoft")["bias"]
        q, k = t["q"], t["k"]
        d = q.shape[-1]
        # Rows: ours hold distances -span..span (2 span + 1), transformers' -span..span-1 (2 span).
        rel = t["rel_embeddings"][: 2 * span]
        rel_pos = build_relative_position(q, k)  # [1, L, L]: i - j
        with torch.no_grad():
            q_scaled = q / math.sqrt(3 * d)  # as transformers' forward scales q before the bias
            c2p = hf_term("c2p", t, span).disentangled_att_bias(q_scaled, k, rel_pos, rel, 3)
            p2c_att = hf_term("p2c", t, span)
            p2c_paper = p2c_att.disentangled_att_bias(q_scaled, k, -rel_pos, rel, 3)
            p2c_code = p2c_att.disentangled_att_bias(q_scaled, k, rel_pos, rel, 3)
        compare(f"v1, k {span}, seed {seed}, L {length}", t["bias"], c2p, p2c_paper, p2c_code, failures, ms)
    check_buckets(args.probe, failures)
    if failures:
        sys.exit("FAILED: " + "; ".join(failures))
    print("ok: DeBERTa's c2p equals transformers' (v1 clipped, v2 log buckets); p2c equals it at the paper's "
          "delta(j, i), and with deberta_p2c: microsoft at delta(i, j)")


if __name__ == "__main__":
    main()
