// Figure 4's reading of position tables (cli/inspect_weights.h) against hand-built tables
// whose entries encode (head, slot), with the expected slot of each distance worked out
// here by plain integer arithmetic from each method's definition.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "cli/inspect_weights.h"
#include "util/errors.h"

using rpe::UserError;
using rpe::cli::weights_by_distance;

namespace {

int64_t clip(int64_t v, int64_t k) { return std::max(-k, std::min(k, v)); }

// table[h, s] = 100 h + s: [heads, slots].
torch::Tensor scalar_table(int64_t heads, int64_t slots) {
  auto t = torch::empty({heads, slots});
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t s = 0; s < slots; ++s) t[h][s] = 100.0 * h + s;
  return t;
}

// table[h, s, c] = 100 h + 10 s + c: [heads, slots, width].
torch::Tensor row_table(int64_t heads, int64_t slots, int64_t width) {
  auto t = torch::empty({heads, slots, width});
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t s = 0; s < slots; ++s)
      for (int64_t c = 0; c < width; ++c) t[h][s][c] = 100.0 * h + 10.0 * s + c;
  return t;
}

}  // namespace

TEST(InspectWeights, M1ReadsOneScalarPerAbsoluteDistanceOfTheChosenHead) {
  // 3 heads, k = 4: the old reading took the 3 heads for distances -1..1.
  const int64_t k = 4, D = 6, head = 1;
  const auto w = weights_by_distance(scalar_table(3, k + 1), "m1", head, D);
  ASSERT_EQ(w.sizes(), (std::vector<int64_t>{2 * D + 1, 1}));
  for (int64_t dist = -D; dist <= D; ++dist)
    EXPECT_EQ(w[dist + D][0].item<float>(), 100.0f * head + std::min<int64_t>(std::llabs(dist), k)) << dist;
}

TEST(InspectWeights, M2SharedAndEvenHeadCounts) {
  const int64_t k = 3, D = 5;
  // Shared across heads ([1, 2k+1]): one value per distance, whatever --head says.
  const auto shared = weights_by_distance(scalar_table(1, 2 * k + 1), "m2", 7, D);
  ASSERT_EQ(shared.sizes(), (std::vector<int64_t>{2 * D + 1, 1}));
  for (int64_t dist = -D; dist <= D; ++dist) EXPECT_EQ(shared[dist + D][0].item<float>(), clip(dist, k) + k) << dist;
  // 2 heads (an even count, refused before): head 1.
  const auto per_head = weights_by_distance(scalar_table(2, 2 * k + 1), "m2", 1, D);
  for (int64_t dist = -D; dist <= D; ++dist)
    EXPECT_EQ(per_head[dist + D][0].item<float>(), 100 + clip(dist, k) + k) << dist;
}

TEST(InspectWeights, M4AndShawRowsAreIndexedByJMinusI) {
  const int64_t k = 2, D = 4, d = 3;
  for (const std::string method : {"m4", "shaw", "m3"}) {
    const auto w = weights_by_distance(row_table(2, 2 * k + 1, d), method, 1, D);
    ASSERT_EQ(w.sizes(), (std::vector<int64_t>{2 * D + 1, d}));
    for (int64_t dist = -D; dist <= D; ++dist)
      for (int64_t c = 0; c < d; ++c)
        EXPECT_EQ(w[dist + D][c].item<float>(), 100 + 10 * (clip(dist, k) + k) + c) << method << " " << dist;
  }
}

TEST(InspectWeights, TransformerXlRowsAreMirroredToJMinusI) {
  // Row s of R W^R is the relative position i - j = s - k; fill each row with its i - j.
  const int64_t k = 3, D = 5, d = 2, heads = 2;
  auto table = torch::empty({heads, 2 * k + 1, d});
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t s = 0; s <= 2 * k; ++s) table[h][s].fill_(static_cast<double>(s - k));
  const auto w = weights_by_distance(table, "transformer_xl", 1, D);
  for (int64_t dist = -D; dist <= D; ++dist)  // the row plotted at j - i = dist holds i - j = -dist (clipped)
    EXPECT_EQ(w[dist + D][0].item<float>(), -clip(dist, k)) << dist;
}

TEST(InspectWeights, RefusesTablesWithoutOneRowPerDistance) {
  auto message = [](const torch::Tensor& t, const std::string& method, int64_t head) {
    try {
      weights_by_distance(t, method, head, 5);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(torch::zeros({32, 4}), "t5_bias", 0).find("not one row per distance"), std::string::npos);
  EXPECT_NE(message(torch::zeros({33, 4}), "t5_bias", 0).find("not one row per distance"), std::string::npos);
  EXPECT_NE(message(torch::Tensor(), "alibi", 0).find("no learned per-distance table"), std::string::npos);
  EXPECT_NE(message(row_table(3, 5, 2), "m4", 3).find("--head 3: the table has 3 heads"), std::string::npos);
  EXPECT_NE(message(scalar_table(3, 6), "m2", 0).find("not one row per distance"), std::string::npos);
}

TEST(InspectWeights, DebertaSharedTableIsMirroredToJMinusI) {
  // P [2k+1, D] is read at d(i,j) = clip(i - j, k) + k (He et al. 2020): row s is i - j = s - k.
  const int64_t k = 2, D = 4, width = 3;
  auto table = torch::empty({2 * k + 1, width});
  for (int64_t s = 0; s <= 2 * k; ++s) table[s].fill_(static_cast<double>(s - k));
  const auto w = weights_by_distance(table, "deberta", /*head=*/5, D);  // one table: --head is ignored
  ASSERT_EQ(w.sizes(), (std::vector<int64_t>{2 * D + 1, width}));
  for (int64_t dist = -D; dist <= D; ++dist) EXPECT_EQ(w[dist + D][2].item<float>(), -clip(dist, k)) << dist;
}
