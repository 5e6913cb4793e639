// MLM loader: a loader restored from a saved cursor yields exactly the batches an
// uninterrupted one would (with and without background prefetch), epochs are seeded
// permutations, and ranks of a multi-process run take disjoint rows of the global batch.
#include <gtest/gtest.h>

#include <set>

#include "data/mlm_dataset.h"
#include "data/wordpiece_tokenizer.h"
#include "data_test_util.h"

namespace rpe {
namespace {

class LoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tok_ = std::make_unique<WordPieceTokenizer>(test::write_tiny_vocab(test::temp_dir()), true);
    std::vector<Document> docs;
    for (int d = 0; d < 40; ++d) {
      Document doc;
      for (int s = 0; s < 3; ++s) doc.sentences.push_back("the cat runs " + std::string(1, 'a' + (d + s) % 26) +
                                                          "bc unaffable hello world playing");
      docs.push_back(doc);
    }
    data_ = std::make_shared<PackedSequences>(pack_documents(docs, *tok_, 16, true));
  }
  MlmLoader make(int64_t batch, int64_t prefetch, int64_t rank = 0, int64_t world = 1) {
    return MlmLoader(data_, *tok_, MaskingOptions{}, batch, 99, /*shuffle=*/true, rank, world, prefetch);
  }
  std::unique_ptr<WordPieceTokenizer> tok_;
  std::shared_ptr<PackedSequences> data_;
};

void expect_same(const MlmBatch& a, const MlmBatch& b) {
  EXPECT_TRUE(torch::equal(a.ids, b.ids));
  EXPECT_TRUE(torch::equal(a.labels, b.labels));
  EXPECT_TRUE(torch::equal(a.padding, b.padding));
  EXPECT_EQ(a.tokens, b.tokens);
}

TEST_F(LoaderTest, RestoredCursorContinuesExactly) {
  const int64_t n = data_->size();
  ASSERT_GT(n, 20);
  const int64_t batches = 3 * n / 7 + 5;  // batch 7: several epoch ends, some inside a batch
  MlmLoader whole = make(7, 3);
  std::vector<MlmBatch> expected;
  LoaderCursor saved;
  for (int64_t i = 0; i < batches; ++i) {
    expected.push_back(whole.next());
    if (i == 5) saved = whole.cursor();
  }
  EXPECT_GE(whole.cursor().epoch, 2);
  for (const int64_t prefetch : {0, 2}) {
    MlmLoader resumed = make(7, prefetch);
    resumed.next();  // state before the restore must not matter
    resumed.restore(saved);
    for (int64_t i = 6; i < batches; ++i) expect_same(resumed.next(), expected[static_cast<size_t>(i)]);
    EXPECT_EQ(resumed.cursor().epoch, whole.cursor().epoch);
    EXPECT_EQ(resumed.cursor().position, whole.cursor().position);
  }
}

TEST_F(LoaderTest, EpochsArePermutationsReshuffledBySeed) {
  MlmLoader loader = make(1, 0);
  const int64_t n = data_->size();
  std::vector<int64_t> e0, e1;
  for (int64_t p = 0; p < n; ++p) {
    e0.push_back(loader.sequence_at(0, p));
    e1.push_back(loader.sequence_at(1, p));
  }
  EXPECT_EQ(std::set<int64_t>(e0.begin(), e0.end()).size(), static_cast<size_t>(n));
  EXPECT_EQ(std::set<int64_t>(e1.begin(), e1.end()).size(), static_cast<size_t>(n));
  EXPECT_NE(e0, e1);
  EXPECT_EQ(loader.sequence_at(0, n + 3), e1[3]);  // positions past the end belong to the next epoch
}

TEST_F(LoaderTest, RanksTakeDisjointRowsOfTheGlobalBatch) {
  MlmLoader global = make(6, 0), rank0 = make(3, 2, 0, 2), rank1 = make(3, 0, 1, 2);
  for (int step = 0; step < 10; ++step) {
    const MlmBatch g = global.next(), r0 = rank0.next(), r1 = rank1.next();
    for (int64_t b = 0; b < 3; ++b) {
      // Global row 2b goes to rank 0 and row 2b+1 to rank 1, masked identically.
      EXPECT_TRUE(torch::equal(r0.ids[b], g.ids[2 * b]));
      EXPECT_TRUE(torch::equal(r1.ids[b], g.ids[2 * b + 1]));
      EXPECT_TRUE(torch::equal(r1.labels[b], g.labels[2 * b + 1]));
    }
  }
  EXPECT_EQ(rank0.cursor().position, global.cursor().position);
}

}  // namespace
}  // namespace rpe
