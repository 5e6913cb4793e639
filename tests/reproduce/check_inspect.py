#!/usr/bin/env python3
"""Independent check of `rpe-train inspect` against the checkpoint's raw tensors.

Position weights (Figure 4): row for distance t must be the table row clip(t, -k, k) + k of
the chosen layer/head (the table read here with torch.jit.load, not through rpe-train).
Attention (Figure 5): recomputed from the paper's equations for the first layer:
  x = LayerNorm(E_word[ids] + E_type[0] (+ P_abs[0:L] for absolute))   (eval: no dropout)
  q, k = x W_q^T + b_q, x W_k^T + b_k, split into H heads of d
  absolute: e_ij = q_i.k_j / sqrt(d)
  m4 (eq. 16): e_ij = (q_i.k_j + q_i.w_{clip(j-i)} + k_j.w_{clip(j-i)}) / sqrt(d)
  P = softmax_j(e), averaged over heads.
usage: check_inspect.py CHECKPOINT WEIGHTS.json WEIGHTS.npy ATTENTION.json
"""
import json
import sys

import numpy as np
import torch


def main():
    ckpt, weights_json, weights_npy, attention_json = sys.argv[1:5]
    m = torch.jit.load(ckpt, map_location="cpu")
    t = {n[len("model/"):]: v.detach() for n, v in list(m.named_parameters()) + list(m.named_buffers())
         if n.startswith("model/")}

    w = json.load(open(weights_json))
    layer, head = w["layer"], w["head"]
    table = t[f"layers.{layer}.attention.position.w"]  # [H|1, 2k+1, d]
    rows = table[0 if table.shape[0] == 1 else head]
    k = (rows.shape[0] - 1) // 2
    expected = np.stack([rows[min(max(dist, -k), k) + k].numpy() for dist in w["distances"]])
    got = np.array(w["weights"])
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert np.abs(got - expected).max() < 1e-6, np.abs(got - expected).max()
    npy = np.load(weights_npy)
    assert npy.dtype == np.float32 and npy.shape == got.shape and np.abs(npy - got).max() < 1e-6

    a = json.load(open(attention_json))
    ids = torch.tensor(a["ids"])
    L = len(ids)
    x = t["word_embeddings.weight"][ids] + t["token_type_embeddings.weight"][0]
    if "position.absolute" in t:
        x = x + t["position.absolute"][:L]
    x = torch.nn.functional.layer_norm(x, (x.shape[-1],), t["embeddings_norm.weight"], t["embeddings_norm.bias"], eps=1e-12)
    p = f"layers.{a['layer']}.attention."
    q = x @ t[p + "query.weight"].T + t[p + "query.bias"]
    kk = x @ t[p + "key.weight"].T + t[p + "key.bias"]
    D = x.shape[-1]
    H = a["heads"]
    d = D // H
    q = q.view(L, H, d).transpose(0, 1)   # [H, L, d]
    kk = kk.view(L, H, d).transpose(0, 1)  # [H, L, d]
    e = q @ kk.transpose(-1, -2)           # [H, L, L]
    if a["method"] == "m4":
        wt = t[p + "position.w"]           # [H|1, 2k+1, d]
        kw = (wt.shape[1] - 1) // 2
        idx = torch.clamp(torch.arange(L)[None, :] - torch.arange(L)[:, None], -kw, kw) + kw  # [L, L]: j - i
        wij = wt[:, idx]                   # [H|1, L, L, d]
        e = e + torch.einsum("hid,hijd->hij", q, wij.expand(H, -1, -1, -1)) \
              + torch.einsum("hjd,hijd->hij", kk, wij.expand(H, -1, -1, -1))
    probs = torch.softmax(e / d ** 0.5, dim=-1).mean(0)  # [L, L]
    got = np.array(a["attention"])
    assert got.shape == (L, L), got.shape
    assert np.allclose(got.sum(-1), 1.0, atol=1e-5)
    diff = np.abs(got - probs.numpy()).max()
    assert diff < 1e-4, f"attention differs from the reference by {diff}"
    print(f"inspect ok: weights {got.shape}, attention max diff {diff:.2e}")


if __name__ == "__main__":
    main()
