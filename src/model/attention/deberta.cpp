// deberta: disentangled attention of He et al. 2020 (content-to-content, content-to-position
// and position-to-content), with clipped relative distances:
//   e_ij = (q_i . k_j + q_i . P^K_{d(i,j)} + k_j . P^Q_{d(j,i)}) / sqrt(3d),
//   d(i,j) = clip(i - j, k) + k,   P^K = P W^{K,r},   P^Q = P W^{Q,r}
// P: relative embeddings [2k+1, D] shared by all layers (owned by the model-level method,
// only read by the layers); W^{K,r}, W^{Q,r}: [D, D] per layer, split into heads. The c2p
// and p2c terms are Q P^K^T and K P^Q^T laid out as [L, L] by relative_scores; no [L, L, d] tensor.
// With position_buckets b > 0 (even), distances go through DeBERTa v2's log buckets instead of
// the clip: d(i,j) = clip(bucket(i - j), b) + b into a [2b+1, D] table, where bucket(r) = r for
// |r| <= b/2 and sign(r) (b/2 + ceil(log(|r| / (b/2)) / log(k / (b/2)) (b/2 - 1))) beyond, so
// that bucket(+-k) = +-(b - 1): k (max_relative) is where the log buckets end, transformers'
// max_relative_positions - 1 (computed in fp32, as there, so that the buckets agree). Beyond k
// the buckets reach +-b, the table's edge rows (transformers clamps its 2b rows to -b..b - 1).
// The 2b+1 projected rows are gathered into one row per distance of the sequence (in fp32: a
// bucket's gradient sums many distances), then laid out as a clipped table would be.
// Not modelled: LayerNorm on P and the enhanced mask decoder. p2c reads P^Q at the paper's
// d(j,i) (eq. 4); Microsoft's code, as transformers ports it, at d(i,j): deberta_p2c: microsoft
// does so (ctest hf_deberta_parity checks both against transformers, docs/attention.md).
#include "model/attention/position_method.h"

namespace rpe {

// DeBERTa v2's bucket of each distance r in `rel` (int64), in fp32 as transformers computes it.
torch::Tensor deberta_log_bucket(const torch::Tensor& rel, int64_t buckets, int64_t log_end) {
  const int64_t mid = buckets / 2;
  auto sign = rel.sign();
  auto abs = torch::where(rel.abs() < mid, torch::full_like(rel, mid - 1), rel.abs());  // [..], int64
  // Both logarithms by torch::log on fp32 tensors, the end's of the double quotient rounded to
  // fp32, as transformers takes them: the same kernel, so that at |r| = k the ratio is exactly 1
  // (std::log, glibc's logf, differs from torch's vectorised log by an ulp for some inputs,
  // which put bucket(k) at b instead of b - 1).
  auto log_end_ratio = torch::log(torch::scalar_tensor(static_cast<double>(log_end) / static_cast<double>(mid),
                                                       torch::kFloat));  // [] fp32
  auto log_pos = torch::ceil(torch::log(abs.to(torch::kFloat) / static_cast<float>(mid)) / log_end_ratio *
                             static_cast<float>(mid - 1)) + static_cast<float>(mid);
  return torch::where(abs <= mid, rel, (log_pos * sign.to(torch::kFloat)).to(torch::kLong));
}

namespace {

class DebertaMethod;

class DebertaTerm : public PositionTermImpl {
 public:
  DebertaTerm(std::shared_ptr<DebertaMethod> owner, const ModelOptions& o, int64_t k);
  torch::Tensor score_bias(const torch::Tensor& q, const torch::Tensor& k) override;
  double scale(int64_t head_size) const override { return 1.0 / std::sqrt(3.0 * static_cast<double>(head_size)); }
  torch::Tensor position_weights() override;

 private:
  std::shared_ptr<DebertaMethod> owner_;  // holds P; not registered here (no duplicate)
  int64_t k_, heads_, d_;
  bool p2c_at_ij_;  // deberta_p2c: microsoft
  torch::Tensor key_proj_, query_proj_;  // [D, D]
};

class DebertaMethod : public PositionMethodImpl {
 public:
  // The registry's deberta_problem has checked b and k (make_position_method).
  explicit DebertaMethod(const ModelOptions& o) : PositionMethodImpl(o, false), buckets_(o.attention.position_buckets) {
    const int64_t rows = 2 * (buckets_ > 0 ? buckets_ : clip_distance()) + 1;
    rel_embeddings = register_parameter("rel_embeddings", torch::randn({rows, o.hidden}) * o.init_std);
  }
  std::shared_ptr<PositionTermImpl> make_layer_term(int64_t) override {
    return std::make_shared<DebertaTerm>(std::static_pointer_cast<DebertaMethod>(shared_from_this()), options_,
                                         clip_distance());
  }
  std::vector<std::string> option_keys() const override { return {"max_relative", "position_buckets", "deberta_p2c"}; }
  std::string describe() const override {
    return "deberta (" +
           (buckets_ > 0 ? std::to_string(buckets_) + " log buckets to k=" : std::string("k=")) +
           std::to_string(clip_distance()) + ", c2p + p2c" +
           (options_.attention.deberta_p2c == "microsoft" ? " at d(i,j)" : "") + ", relative table shared by layers)";
  }
  bool bucketed() const { return buckets_ > 0; }
  // The rows of a (2b+1)-row table `dim` for distances -R..R in turn: a clipped table's layout
  // at reach R. A bf16/fp16 table is gathered in fp32 (a bucket's gradient sums many distances)
  // and returned in its dtype. The slots are built once per length and device (on the CPU, then copied).
  torch::Tensor rows_by_distance(const torch::Tensor& table, int64_t dim, int64_t R) const {
    const int64_t k = clip_distance();
    auto slots = cached_position_tensor({kLogBucketRows, R, buckets_, k, 0}, table.device(), [&] {
      auto bucket = deberta_log_bucket(torch::arange(-R, R + 1, torch::kLong), buckets_, k);  // [2R+1]
      return (bucket.clamp(-buckets_, buckets_) + buckets_).to(table.device());
    });
    if (!c10::isReducedFloatingType(table.scalar_type())) return table.index_select(dim, slots);
    return table.to(torch::kFloat).index_select(dim, slots).to(table.scalar_type());
  }
  torch::Tensor rel_embeddings;  // P: [2k+1, D], or [2b+1, D] with buckets

 private:
  int64_t buckets_;
};

DebertaTerm::DebertaTerm(std::shared_ptr<DebertaMethod> owner, const ModelOptions& o, int64_t k)
    : owner_(std::move(owner)), k_(k), heads_(o.heads), d_(o.hidden / o.heads),
      p2c_at_ij_(o.attention.deberta_p2c == "microsoft") {
  key_proj_ = register_parameter("pos_key_proj", torch::randn({o.hidden, o.hidden}) * o.init_std);
  query_proj_ = register_parameter("pos_query_proj", torch::randn({o.hidden, o.hidden}) * o.init_std);
}

torch::Tensor DebertaTerm::score_bias(const torch::Tensor& q, const torch::Tensor& k) {
  const int64_t L = q.size(2);
  const bool bucketed = owner_->bucketed();
  // Projected: the table's 2k'+1 rows the sequence reaches (clipped), or all its 2b+1 bucket
  // rows, then gathered into one row per distance -(L-1)..L-1: a clipped table of reach L - 1.
  const int64_t reach = bucketed ? L - 1 : relative_reach(k_, L);
  const auto& table = owner_->rel_embeddings;
  auto p = (bucketed ? table : narrow_relative(table, 0, k_, reach)).to(q.dtype());  // [2k'+1 | 2b+1, D]
  const int64_t slots = p.size(0);
  auto per_head = [&](const torch::Tensor& w) {  // [slots, D] x [D, D] -> [H, slots, d], pre-scaled
    auto t = torch::matmul(p, w.to(q.dtype()) * scale(d_)).view({slots, heads_, d_}).permute({1, 0, 2});
    return bucketed ? owner_->rows_by_distance(t, 1, reach) : t;  // [H, 2L-1, d] with buckets
  };
  // c2p: q_i . P^K at clip(i-j) + k', i.e. the reversed table at clip(j-i) + k'.
  auto c2p = relative_scores(q, per_head(key_proj_).flip(1), reach);  // [B, H, L, L]
  // p2c: k_j . P^Q at clip(j-i) + k', read from key j's row (microsoft: at clip(i-j) + k', the
  // reversed table).
  auto pq = per_head(query_proj_);
  auto p2c = relative_key_scores(k, p2c_at_ij_ ? pq.flip(1) : pq, reach);  // [B, H, L, L]
  return c2p + p2c;
}

// P by distance i - j (inspect's mirrored_shared layout): with buckets, one row per distance
// -(k+1)..k+1, whose edge rows are the buckets +-b that every longer distance reads (for even
// b, bucket(k + 1) = b).
torch::Tensor DebertaTerm::position_weights() {
  const auto& p = owner_->rel_embeddings;
  return owner_->bucketed() ? owner_->rows_by_distance(p, 0, k_ + 1) : p;
}

}  // namespace

std::shared_ptr<PositionMethodImpl> make_position_method_deberta(const ModelOptions& o) {
  return std::make_shared<DebertaMethod>(o);
}

}  // namespace rpe
