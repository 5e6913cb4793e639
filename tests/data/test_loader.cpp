// MLM loader: a loader restored from a saved cursor yields exactly the batches an
// uninterrupted one would (with and without background prefetch, in memory and from shards),
// epochs are seeded permutations, ranks of a multi-process run take disjoint rows of the
// global batch whose union is the epoch, and lazy sequences from shards equal the in-memory
// packing token for token.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <ctime>
#include <fstream>
#include <functional>
#include <set>

#include "data/mlm_dataset.h"
#include "data/packing.h"
#include "data/shard_sequences.h"
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
    data_ = std::make_shared<PackedSequences>(pack_documents(docs, *tok_, 16, Packing::full_sentences));
  }
  MlmLoader make(int64_t batch, int64_t prefetch, int64_t rank = 0, int64_t world = 1) {
    return MlmLoader(data_, *tok_, {MaskingOptions{}, batch, 99, /*shuffle=*/true, rank, world, prefetch});
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

namespace rpe {
namespace {
namespace fs = std::filesystem;

TEST(EpochPermutation, IsABijectionForAnySize) {
  for (const uint64_t n : {1u, 2u, 3u, 5u, 64u, 1000u, 4097u}) {
    for (const uint64_t key : {1ull, 0xDEADBEEFull}) {
      const EpochPermutation perm(n, key);
      std::vector<int> seen(n, 0);
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t j = perm(i);
        ASSERT_LT(j, n);
        ++seen[j];
      }
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(n)) << n;
    }
  }
  const EpochPermutation a(1000, 1), b(1000, 2);
  int same = 0;
  for (uint64_t i = 0; i < 1000; ++i) same += a(i) == b(i);
  EXPECT_LT(same, 20);  // another key, another order
}

// Prepared shards of a random corpus, small enough that sequences cross shard boundaries.
class ShardLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir();
    d_.tokenizer = "wordpiece";
    d_.tokenizer_model = test::write_tiny_vocab(dir_).string();
    d_.valid_fraction = 0.1;
    d_.shard_tokens = 3000;
    test::write_text(dir_ / "a.txt", test::random_corpus(600, 5));
    d_.train_files = {(dir_ / "a.txt").string()};
    tok_ = std::make_unique<WordPieceTokenizer>(d_.tokenizer_model, true);
    prepare_data(d_, *tok_, {dir_ / "out", 2, false});
    shards_ = std::make_shared<const PreparedShards>(open_prepared(dir_ / "out", *tok_));
  }
  std::shared_ptr<ShardSequences> sequences(int64_t L, Packing packing, bool valid = false) {
    return std::make_shared<ShardSequences>(shards_, valid, dir_ / "out", tok_->special(), L, packing);
  }
  // Opens the train split (length L, full_sentences) in a child process after `setup`, which makes
  // that process's index writes fail somewhere: true when the child computed the index (mapped
  // from no earlier start's file) and held it in memory or not, as `in_memory` says.
  bool computed_in_child(int64_t L, const std::function<void()>& setup, bool in_memory) {
    const pid_t child = ::fork();
    if (child < 0) return false;
    if (child == 0) {
      setup();
      const ShardSequences s(shards_, false, dir_ / "out", tok_->special(), L, Packing::full_sentences);
      ::_exit(!s.index_from_cache() && (s.index_heap_bytes() > 0) == in_memory ? 0 : 4);
    }
    int status = 0;
    return ::waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  fs::path dir_;
  DataOptions d_;
  std::unique_ptr<WordPieceTokenizer> tok_;
  std::shared_ptr<const PreparedShards> shards_;
};

TEST_F(ShardLoaderTest, LazySequencesEqualTheInMemoryPacking) {
  ASSERT_GT(shards_->train.size(), 3u);
  for (const Packing packing : {Packing::full_sentences, Packing::doc_sentences, Packing::contiguous})
    for (const int64_t L : {8, 16, 37, 128}) {
      for (const bool valid : {false, true}) {
        const auto lazy = sequences(L, packing, valid);
        const auto packed = pack_streams(PreparedShards::streams(valid ? shards_->valid : shards_->train),
                                         tok_->special(), L, packing);
        ASSERT_EQ(lazy->size(), packed.size()) << L << packing_name(packing);
        EXPECT_EQ(lazy->real_tokens(), packed.real_tokens());
        std::vector<int32_t> tokens(static_cast<size_t>(L));
        std::vector<uint8_t> starts(static_cast<size_t>(L));
        for (int64_t i = 0; i < lazy->size(); ++i) {
          lazy->read(i, tokens.data(), starts.data());
          ASSERT_TRUE(std::equal(tokens.begin(), tokens.end(), packed.tokens.begin() + i * L)) << "L " << L << " seq " << i;
          ASSERT_TRUE(std::equal(starts.begin(), starts.end(), packed.word_start.begin() + i * L)) << i;
        }
      }
    }
  // The index was cached beside the shards: the next open maps it instead of rebuilding.
  EXPECT_TRUE(fs::exists(dir_ / "out" / "index-v2-train-L128-doc.bin"));
  EXPECT_TRUE(sequences(128, Packing::doc_sentences)->index_from_cache());
}

// The cached index's token count is under its checksum: a bit flipped there (byte 48 of the
// header: magic, version, key, length, packing and count come first) makes the cache stale, so it
// is rebuilt with the right count and written again, not trusted.
TEST_F(ShardLoaderTest, AnIndexCacheWithAFlippedTokenCountIsRebuilt) {
  const int64_t real = sequences(16, Packing::full_sentences)->real_tokens();
  const fs::path cache = dir_ / "out" / ShardSequences::index_cache_name(false, 16, Packing::full_sentences);
  ASSERT_TRUE(fs::exists(cache));
  {
    std::fstream f(cache, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(48);
    char byte = 0;
    f.read(&byte, 1);
    byte ^= 1;
    f.seekp(48);
    f.write(&byte, 1);
  }
  const auto again = sequences(16, Packing::full_sentences);
  EXPECT_FALSE(again->index_from_cache());
  EXPECT_EQ(again->real_tokens(), real);
  EXPECT_TRUE(sequences(16, Packing::full_sentences)->index_from_cache()) << "written again";
}

// An older binary's cache (named without a format version, as formats 1 and 2 were) in the same
// shard folder is neither read nor replaced: a job still running the old binary keeps its cache,
// and neither rebuilds the other's at every start.
TEST_F(ShardLoaderTest, AnOlderFormatsIndexCacheIsLeftToItsOwnBinary) {
  const fs::path old_cache = dir_ / "out" / "index-train-L16-full.bin";
  const std::string old_bytes = "RPEINDEX, as an older binary left it";
  test::write_text(old_cache, old_bytes);
  const int64_t real = sequences(16, Packing::full_sentences)->real_tokens();
  EXPECT_TRUE(sequences(16, Packing::full_sentences)->index_from_cache());
  EXPECT_EQ(read_file(old_cache), old_bytes);
  EXPECT_EQ(sequences(16, Packing::full_sentences)->real_tokens(), real);
}

// A shard folder this process cannot write (a read-only dataset folder; here the cache's name
// is taken by a folder, which stops root as well): the index goes to the cache folder
// (RPE_TRAIN_CACHE_DIR), named by its key, and the next start maps it from there. Before, every
// start rebuilt it (a scan of every boundary of the corpus) and kept it on the heap, 8 bytes per
// sequence for the whole run, on every rank.
TEST_F(ShardLoaderTest, AnIndexThatCannotBeCachedBesideTheShardsIsCachedInTheCacheFolder) {
  const std::string name = ShardSequences::index_cache_name(false, 24, Packing::contiguous);
  fs::create_directories(dir_ / "out" / name);
  const fs::path cache = dir_ / "cache";
  ::setenv("RPE_TRAIN_CACHE_DIR", cache.c_str(), 1);
  const auto first = sequences(24, Packing::contiguous);
  const auto second = sequences(24, Packing::contiguous);
  ::unsetenv("RPE_TRAIN_CACHE_DIR");
  EXPECT_FALSE(first->index_from_cache());
  EXPECT_EQ(first->index_heap_bytes(), 0u) << "read through the cache file's map";
  EXPECT_TRUE(second->index_from_cache()) << "mapped from the cache folder, not rebuilt";
  EXPECT_EQ(second->index_heap_bytes(), 0u);
  int cached = 0;
  for (const auto& e : fs::directory_iterator(cache)) {
    const std::string f = e.path().filename().string();
    cached += f.size() > name.size() && f.compare(f.size() - name.size(), name.size(), name) == 0;
  }
  EXPECT_EQ(cached, 1);
  const auto packed = pack_streams(PreparedShards::streams(shards_->train), tok_->special(), 24, Packing::contiguous);
  ASSERT_EQ(second->size(), packed.size());
  EXPECT_EQ(second->real_tokens(), packed.real_tokens());
  std::vector<int32_t> tokens(24);
  std::vector<uint8_t> starts(24);
  for (int64_t i = 0; i < second->size(); ++i) {
    second->read(i, tokens.data(), starts.data());
    ASSERT_TRUE(std::equal(tokens.begin(), tokens.end(), packed.tokens.begin() + i * 24)) << i;
  }
}

// RPE_TRAIN_CACHE_DIR naming no folder this process can make (a path through a file) is refused
// by name where the cache folder is needed (the index cannot go beside the shards), not
// swapped for another folder; where the shard folder takes the index it is never consulted.
TEST_F(ShardLoaderTest, AnUnusableCacheDirIsRefusedWhereItIsNeeded) {
  test::write_text(dir_ / "file.txt", "x");
  const fs::path bad = dir_ / "file.txt" / "cache";
  ::setenv("RPE_TRAIN_CACHE_DIR", bad.c_str(), 1);
  EXPECT_FALSE(sequences(20, Packing::contiguous)->index_from_cache()) << "cached beside the shards";
  fs::create_directories(dir_ / "out" / ShardSequences::index_cache_name(false, 28, Packing::contiguous));
  const std::string msg = test::user_error([&] { sequences(28, Packing::contiguous); });
  ::unsetenv("RPE_TRAIN_CACHE_DIR");
  EXPECT_EQ(msg, "RPE_TRAIN_CACHE_DIR=" + bad.string() + ": not a folder this process can create and write");
}

// The ranks of a first start on one shard folder: one builds the index while the others wait on
// its lock, then map what it wrote (before, each scanned the corpus and wrote its own copy). A
// child process holds the lock and builds; this one, started meanwhile, finds the cache.
TEST_F(ShardLoaderTest, AStartWaitsForTheIndexAnotherProcessIsBuilding) {
  const fs::path out = dir_ / "out";
  const fs::path cache = out / ShardSequences::index_cache_name(false, 40, Packing::full_sentences);
  // A rank building the index meanwhile: it holds the lock, builds after a while and lets go.
  const pid_t child = test::fork_holding_lock(cache.string() + ".lock", dir_ / "child-holds-the-lock", 300000, [&] {
    return !ShardSequences(shards_, false, out, tok_->special(), 40, Packing::full_sentences).index_from_cache();
  });
  ASSERT_GT(child, 0);
  const auto data = sequences(40, Packing::full_sentences);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child built the index";
  EXPECT_TRUE(data->index_from_cache()) << "waited for the child's index instead of building its own";
  EXPECT_EQ(data->real_tokens(), sequences(40, Packing::full_sentences)->real_tokens());
}

// A build beside the shards that cannot write its index (a full disk; here the child's temp file
// name there is taken by a folder, which stops root as well) leaves a note in the index's lock
// file: the next start goes straight to the cache folder and maps the index the failed one wrote
// there. Before, it scanned the corpus and tried to write beside the shards again, and so did each
// rank waiting on the lock, one after another: 64 scans in a row at the paper's scale. A note an
// hour old (the disk since freed) is ignored: that start builds beside the shards and clears it.
TEST_F(ShardLoaderTest, AFailedIndexBuildSendsTheNextStartStraightToTheCacheFolder) {
  const fs::path beside = dir_ / "out" / ShardSequences::index_cache_name(false, 44, Packing::full_sentences);
  const fs::path lock = beside.string() + ".lock";
  ::setenv("RPE_TRAIN_CACHE_DIR", (dir_ / "cache").c_str(), 1);
  const auto take_temp_name = [&] { fs::create_directories(beside.string() + ".tmp." + std::to_string(::getpid())); };
  EXPECT_TRUE(computed_in_child(44, take_temp_name, false)) << "the child built the index in the cache folder";
  ASSERT_FALSE(fs::exists(beside));
  const auto next = sequences(44, Packing::full_sentences);
  EXPECT_TRUE(next->index_from_cache()) << "mapped from the cache folder, not scanned again";
  EXPECT_FALSE(fs::exists(beside)) << "no second build beside the shards";
  const struct timespec hour_ago[2] = {{std::time(nullptr) - 3600, 0}, {std::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, lock.c_str(), hour_ago, 0), 0);
  const auto later = sequences(44, Packing::full_sentences);
  ::unsetenv("RPE_TRAIN_CACHE_DIR");
  EXPECT_FALSE(later->index_from_cache()) << "built beside the shards, the old note ignored";
  EXPECT_TRUE(fs::exists(beside));
  EXPECT_EQ(later->index_heap_bytes(), 0u);
  EXPECT_EQ(fs::file_size(lock), 0u) << "the old note cleared";
  EXPECT_EQ(later->real_tokens(), next->real_tokens());
  EXPECT_TRUE(sequences(44, Packing::full_sentences)->index_from_cache());
}

// The same where the cache folder's build fails too (a full disk under both; here the child's
// file size limit, met as the index is written after the scan, as a full disk's would be): the
// next start computes its index in memory at once, writing neither, instead of two builds that
// fail. Another length's index, with no note, is still built beside the shards.
TEST_F(ShardLoaderTest, AFailedIndexBuildInTheCacheFolderTooSendsTheNextStartStraightToMemory) {
  constexpr rlim_t kLimit = 1024;  // bytes a file of the child may reach: a note, not an index
  const fs::path out = dir_ / "out", cache = dir_ / "cache";
  const fs::path beside = out / ShardSequences::index_cache_name(false, 44, Packing::full_sentences);
  ::setenv("RPE_TRAIN_CACHE_DIR", cache.c_str(), 1);
  EXPECT_TRUE(computed_in_child(44, [] {
    std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails (EFBIG) instead of killing the child
    const struct rlimit limit = {kLimit, kLimit};
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }, true)) << "the child could cache the index nowhere";
  const auto next = sequences(44, Packing::full_sentences);
  ::unsetenv("RPE_TRAIN_CACHE_DIR");
  ASSERT_GT(sizeof(uint64_t) * static_cast<size_t>(next->size() + 9), kLimit) << "the index fits under the limit";
  EXPECT_FALSE(next->index_from_cache());
  EXPECT_GT(next->index_heap_bytes(), 0u) << "computed in memory at once";
  EXPECT_FALSE(fs::exists(beside)) << "no second build beside the shards";
  for (const auto& e : fs::directory_iterator(cache))
    EXPECT_EQ(e.path().extension(), ".lock") << "no second build in the cache folder: " << e.path();
  EXPECT_FALSE(sequences(45, Packing::full_sentences)->index_from_cache());
  EXPECT_TRUE(fs::exists(out / ShardSequences::index_cache_name(false, 45, Packing::full_sentences)));
}

TEST_F(ShardLoaderTest, TwoRanksReadDisjointSharesWhoseUnionIsTheEpoch) {
  const auto data = sequences(16, Packing::full_sentences);
  const int64_t n = data->size(), B = 3, W = 2;
  MlmLoader global(data, *tok_, {MaskingOptions{}, B * W, 7}), r0(data, *tok_, {MaskingOptions{}, B, 7, true, 0, W, 2}),
      r1(data, *tok_, {MaskingOptions{}, B, 7, true, 1, W});
  std::vector<int64_t> share0, share1;
  for (int64_t p = 0; p < n; ++p) (p % W == 0 ? share0 : share1).push_back(r0.sequence_at(0, p));
  std::set<int64_t> all(share0.begin(), share0.end());
  for (const auto s : share1) EXPECT_TRUE(all.insert(s).second) << "sequence " << s << " on both ranks";
  EXPECT_EQ(all.size(), static_cast<size_t>(n));
  for (int step = 0; step < 12; ++step) {  // rows of the global batch, dealt to the ranks
    const MlmBatch g = global.next(), a = r0.next(), b = r1.next();
    for (int64_t row = 0; row < B; ++row) {
      EXPECT_TRUE(torch::equal(a.ids[row], g.ids[W * row]));
      EXPECT_TRUE(torch::equal(b.labels[row], g.labels[W * row + 1]));
    }
  }
}

TEST_F(ShardLoaderTest, ResumeMidEpochIsBitwiseExactFromShards) {
  const int64_t B = 5;
  MlmLoader whole(sequences(32, Packing::full_sentences), *tok_, {MaskingOptions{}, B, 11, true, 0, 1, 2});
  const int64_t batches = 2 * whole.sequences() / B + 3;  // across an epoch end
  std::vector<MlmBatch> expected;
  LoaderCursor saved;
  for (int64_t i = 0; i < batches; ++i) {
    expected.push_back(whole.next());
    if (i == 4) saved = whole.cursor();
  }
  ASSERT_GT(saved.position, 0);
  // A new process: shards reopened, the index mapped from its cache, the cursor restored.
  auto reopened = std::make_shared<const PreparedShards>(open_prepared(dir_ / "out", *tok_));
  auto data = std::make_shared<ShardSequences>(reopened, false, dir_ / "out", tok_->special(), 32, Packing::full_sentences);
  EXPECT_TRUE(data->index_from_cache());
  MlmLoader resumed(data, *tok_, {MaskingOptions{}, B, 11, true, 0, 1, 3});
  resumed.restore(saved);
  for (int64_t i = 5; i < batches; ++i) expect_same(resumed.next(), expected[static_cast<size_t>(i)]);
  EXPECT_EQ(resumed.cursor().epoch, whole.cursor().epoch);
  EXPECT_EQ(resumed.cursor().position, whole.cursor().position);
}

}  // namespace
}  // namespace rpe
