// The index arithmetic of the relative-layout CUDA kernels (relative_layout.h), written once
// for both compilers: relative_layout_cuda.cu runs it on the device (a block per row on the query
// side, shared-memory tiles on the key side), and the CPU tests run the very same functions in
// plain loops against ATen's gather (test_relative_scores.cpp).
//
// s holds x . table rows: s[b, h, r, c] = x_r . table[c] for slot c = clip(dist, k) + k of
// distance dist in [-k, k] (columns c > 2k are padding for aligned GEMMs); its [L, W] blocks
// are row-major, the blocks at b * sb + h * sh. The layout kernel writes out [B, H, L, L]
// (contiguous):
//   query side: out[b, h, i, j] = s[b, h, i, clip(j - i, k) + k]   (relative_scores)
//   key side:   out[b, h, i, j] = s[b, h, j, clip(j - i, k) + k]   (relative_key_scores)
// Its gradient ds[b, h, r, c] (laid out as s) sums dL/dout over the elements that read slot c
// of row r: one for inner slots, a run of them for the clipped ends, none for the padding.
#pragma once
#include <cstdint>
#include <string>

#include "util/host_device.h"

namespace rpe::rlk {

struct Dims {
  int64_t B, H, L, W, k;  // batch, heads, length, s's row length, reach (k <= L - 1, 2k + 1 <= W)
  int64_t sb, sh;         // s's strides of b and h, in elements
  bool key_side;
  RPE_HD int64_t block(int64_t bh) const { return bh / H * sb + bh % H * sh; }  // s's [L, W] block of (b, h)
};

// The slot out[bh, i, j] reads in its row of s: clip(j - i, k) + k.
RPE_HD int64_t slot(const Dims& n, int64_t i, int64_t j) {
  const int64_t dist = j - i;
  return (dist < -n.k ? -n.k : dist > n.k ? n.k : dist) + n.k;
}

// The offset in s that out[bh, i, j] reads (threads along j: query-side reads coalesce).
RPE_HD int64_t source(const Dims& n, int64_t bh, int64_t i, int64_t j) {
  return n.block(bh) + (n.key_side ? j : i) * n.W + slot(n, i, j);
}

struct Run {
  int64_t lo, hi;  // inclusive; empty when lo > hi
};

// The elements whose gradients ds[bh, r, c] sums: out[r, t] for t in the run (query side, t = j)
// or out[t, r] (key side, t = i).
RPE_HD Run summed(const Dims& n, int64_t r, int64_t c) {
  const int64_t far = n.L - 1;
  if (c > 2 * n.k) return {0, -1};  // padding
  int64_t dlo = c - n.k, dhi = c - n.k;
  if (c == 0) dlo = -far;         // distances <= -k clip to slot 0
  if (c == 2 * n.k) dhi = far;    // distances >= k to slot 2k (with k = 0: every distance)
  Run run = n.key_side ? Run{r - dhi, r - dlo} : Run{r + dlo, r + dhi};  // i = j - dist, j = i + dist
  if (run.lo < 0) run.lo = 0;
  if (run.hi > far) run.hi = far;
  return run;
}

// The offset of dL/dout[bh, r, t] (query side) or dL/dout[bh, t, r] (key side) in the
// contiguous [B, H, L, L] gradient.
RPE_HD int64_t grad_offset(const Dims& n, int64_t bh, int64_t r, int64_t t) {
  return (bh * n.L + (n.key_side ? t : r)) * n.L + (n.key_side ? r : t);
}

// The key side through shared-memory tiles of kTile x kTile, so that its reads coalesce too
// (untiled, a warp's threads along j read a diagonal of s, or a column of the gradient).
// Forward, tile (i0, j0): tile[row][lane] = s[source(bh, i0 + lane, j0 + row)] (threads along i
// read consecutive slots), then out[i0 + row, j0 + lane] = tile[lane][row].
// Backward, tile (j0, c0) of ds: an inner slot c of row j reads g[i, j] at i = j - (c - k), so
// the tile's 32 x 32 slots read 2 kTile - 1 rows of g from key_grad_base on, loaded along j;
// slot (j0 + row, c0 + lane) then reads staged row key_grad_row(row, lane), column row.
constexpr int kTile = 32;

RPE_HD int64_t key_grad_base(const Dims& n, int64_t j0, int64_t c0) { return j0 - c0 + n.k - (kTile - 1); }
RPE_HD int64_t key_grad_row(int64_t row, int64_t lane) { return row - lane + (kTile - 1); }
// Whether slot c has exactly one source (inner: 0 < c < 2k); the clipped ends sum a run and
// padding slots none (summed() says which elements).
RPE_HD bool inner_slot(const Dims& n, int64_t c) { return c > 0 && c < 2 * n.k; }

enum class Dtype { f64, f32, bf16, f16 };

// out = layout(s); ds = its gradient from g = dL/dout. Pointers of `dt` elements; out and g
// contiguous, ds laid out as s. Each returns "" or the CUDA error of its launch (read, so cleared).
std::string cuda_layout(const Dims& n, Dtype dt, const void* s, void* out, void* stream);
std::string cuda_layout_grad(const Dims& n, Dtype dt, const void* g, void* ds, void* stream);

}  // namespace rpe::rlk
