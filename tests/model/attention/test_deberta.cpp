// deberta (He et al. 2020) against a naive loop over (i, j):
//   e_ij = (q_i . k_j + q_i . P^K_{clip(i-j,k)} + k_j . P^Q_{clip(j-i,k)}) / sqrt(3d)
// P^K = P W^{K,r}, P^Q = P W^{Q,r}, split into heads; P shared by layers.
#include <cmath>
#include <map>

#include "reference.h"

namespace rpe::test {

TEST(Deberta, MatchesNaiveEquation) {
  for (int64_t k : kClips) {
    auto layer = make_layer(tiny_options("deberta", k));
    const int64_t kk = k > 0 ? k : 15;
    auto p = layer.method_param("rel_embeddings");  // [2k+1, D]
    EXPECT_EQ(p.sizes(), torch::IntArrayRef({2 * kk + 1, 8}));
    auto wk = layer.param("pos_key_proj"), wq = layer.param("pos_query_proj");  // [D, D]
    RefSpec spec;
    spec.score = [&](const Qkv& t, int64_t i, int64_t j) {
      auto pk = torch::matmul(p[clip(i - j, kk) + kk], wk).view({2, 4});  // [H, d]
      auto pq = torch::matmul(p[clip(j - i, kk) + kk], wq).view({2, 4});
      auto qi = t.q.select(2, i), kj = t.k.select(2, j);
      return ((qi * kj).sum(-1) + (qi * pk).sum(-1) + (kj * pq).sum(-1)) / std::sqrt(12.0);
    };
    for (int64_t L : kLengths)
      expect_matches_reference(layer, L, spec, "deberta k=" + std::to_string(k) + " L=" + std::to_string(L));
  }
}

// deberta_p2c: microsoft reads P^Q at clip(i-j, k), as Microsoft's code and transformers do.
TEST(Deberta, MicrosoftP2cMatchesNaiveEquation) {
  for (int64_t k : {3, 0}) {
    auto o = tiny_options("deberta", k);
    o.attention.deberta_p2c = "microsoft";
    auto layer = make_layer(o);
    const int64_t kk = k > 0 ? k : 15;
    auto p = layer.method_param("rel_embeddings");  // [2k+1, D]
    auto wk = layer.param("pos_key_proj"), wq = layer.param("pos_query_proj");  // [D, D]
    RefSpec spec;
    spec.score = [&](const Qkv& t, int64_t i, int64_t j) {
      auto pk = torch::matmul(p[clip(i - j, kk) + kk], wk).view({2, 4});  // [H, d]
      auto pq = torch::matmul(p[clip(i - j, kk) + kk], wq).view({2, 4});  // d(i,j), not d(j,i)
      auto qi = t.q.select(2, i), kj = t.k.select(2, j);
      return ((qi * kj).sum(-1) + (qi * pk).sum(-1) + (kj * pq).sum(-1)) / std::sqrt(12.0);
    };
    for (int64_t L : kLengths)
      expect_matches_reference(layer, L, spec, "deberta microsoft k=" + std::to_string(k) + " L=" + std::to_string(L));
  }
}

// DeBERTa v2's log buckets, 8 buckets (4 exact per direction) ending at k = 16: the values
// transformers' make_log_bucket_position gives (bucket_size 8, max_position 17), and by hand
// 4 + ceil(log(r / 4) / log(16 / 4) * 3) beyond 4 (r = 7: log 1.75 / log 4 * 3 = 1.21 -> 6).
TEST(Deberta, LogBucketsByHand) {
  const std::vector<std::pair<int64_t, int64_t>> table{
      {0, 0},  {1, 1},  {3, 3},  {4, 4},  {5, 5},  {6, 5},  {7, 6},   {8, 6},   {10, 6},  {11, 7},
      {16, 7}, {17, 8}, {25, 8}, {26, 9}, {64, 10}, {65, 11}, {101, 11}, {102, 12}};
  std::vector<int64_t> rel;
  for (auto [r, b] : table) rel.insert(rel.end(), {r, -r});
  auto got = deberta_log_bucket(torch::tensor(rel), 8, 16);
  for (size_t n = 0; n < table.size(); ++n) {
    EXPECT_EQ(got[2 * n].item<int64_t>(), table[n].second) << "r=" << table[n].first;
    EXPECT_EQ(got[2 * n + 1].item<int64_t>(), -table[n].second) << "r=" << -table[n].first;
  }
}

// The log buckets end at k: bucket(+-k) = +-(b - 1), and one further, bucket(+-(k+1)) = +-b, the
// table's edge rows, for every even b and k the rule allows (here b up to 512, k up to 1100).
// Both logarithms must come from one kernel: with the divisor from std::log, the ratio at |r| = k
// was 1 + 1 ulp for ~2% of the settings (b 8, k 6; b 256, k 162), and bucket(k) was b.
TEST(Deberta, LogBucketsEndAtK) {
  std::vector<int64_t> sizes;
  for (int64_t b = 4; b <= 40; b += 2) sizes.push_back(b);
  for (int64_t b : {64, 128, 256, 512}) sizes.push_back(b);
  int64_t checked = 0;
  for (int64_t b : sizes)
    for (int64_t k = b / 2 + 1; k <= 1100; ++k) {
      auto got = deberta_log_bucket(torch::tensor({k, -k, k + 1, -(k + 1)}), b, k);
      const auto* v = got.data_ptr<int64_t>();
      ASSERT_TRUE(v[0] == b - 1 && v[1] == -(b - 1)) << "b=" << b << " k=" << k << ": bucket(k) = " << v[0];
      ASSERT_TRUE(v[2] >= b && v[3] <= -b) << "b=" << b << " k=" << k << ": bucket(k+1) = " << v[2];
      ++checked;
    }
  EXPECT_GT(checked, 20000);
}

// With buckets the table has 2b+1 rows, read at clip(bucket(i - j), b) + b (c2p) and
// clip(bucket(j - i), b) + b (p2c). The buckets of distances 0..32: transformers'
// make_log_bucket_position (bucket_size b, max_position k + 1), clipped to b here.
TEST(Deberta, LogBucketsMatchNaiveEquation) {
  const std::map<int64_t, std::vector<int64_t>> by_hf{
      {8, {0, 1, 2, 3, 4, 6, 7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8}},   // k 6
      {4, {0, 1, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}}};  // k 15
  for (auto [buckets, k] : std::vector<std::pair<int64_t, int64_t>>{{8, 6}, {4, 0}}) {
    auto o = tiny_options("deberta", k);
    o.attention.position_buckets = buckets;
    auto layer = make_layer(o);
    auto p = layer.method_param("rel_embeddings");  // [2b+1, D]
    EXPECT_EQ(p.sizes(), torch::IntArrayRef({2 * buckets + 1, 8}));
    const auto& bucket = by_hf.at(buckets);
    auto slot = [&](int64_t r) { return (r < 0 ? -bucket.at(static_cast<size_t>(-r)) : bucket.at(static_cast<size_t>(r))) + buckets; };
    auto wk = layer.param("pos_key_proj"), wq = layer.param("pos_query_proj");  // [D, D]
    RefSpec spec;
    spec.score = [&](const Qkv& t, int64_t i, int64_t j) {
      auto pk = torch::matmul(p[slot(i - j)], wk).view({2, 4});  // [H, d]
      auto pq = torch::matmul(p[slot(j - i)], wq).view({2, 4});
      auto qi = t.q.select(2, i), kj = t.k.select(2, j);
      return ((qi * kj).sum(-1) + (qi * pk).sum(-1) + (kj * pq).sum(-1)) / std::sqrt(12.0);
    };
    for (int64_t L : kLengths)
      expect_matches_reference(layer, L, spec, "deberta b=" + std::to_string(buckets) + " L=" + std::to_string(L));
  }
}

// Figure 4's reading of a bucketed table: a row per distance i - j, -(k+1)..k+1, each its bucket's
// row (8 buckets to k = 6: distances 0..7 in buckets 0, 1, 2, 3, 4, 6, 7, 8).
TEST(Deberta, LogBucketWeightsByDistance) {
  auto o = tiny_options("deberta", 6);
  o.attention.position_buckets = 8;
  auto layer = make_layer(o);
  auto p = layer.method_param("rel_embeddings");  // [17, D]
  auto rows = layer.attention->position->position_weights();  // [15, D]: distances -7..7
  ASSERT_EQ(rows.sizes(), torch::IntArrayRef({15, 8}));
  for (int64_t r = -7; r <= 7; ++r) {
    const std::vector<int64_t> bucket{0, 1, 2, 3, 4, 6, 7, 8};  // of |r| = 0..7
    const int64_t b = (r < 0 ? -1 : 1) * bucket[static_cast<size_t>(std::abs(r))];
    EXPECT_TRUE(torch::equal(rows[r + 7], p[b + 8])) << "distance " << r << ", bucket " << b;
  }
}

}  // namespace rpe::test
