// Shards, packing and prepare-data: shard round trips (uint16/uint32), rejection of truncated
// and foreign files, a hand-computed packing table, identical packing from prepared shards
// and from text, no-op reruns, thread-count independence, and bad input files.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "data/corpus.h"
#include "data/packing.h"
#include "data/prepare.h"
#include "data/pretrain_corpus.h"
#include "data/wordpiece_tokenizer.h"
#include "data/sp_tokenizer.h"
#include "data_test_util.h"
#include "fifo_guard.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace rpe {
namespace {
namespace fs = std::filesystem;

// Three documents: {5 6 7 | 8 9}, {10 11 12 13}, {20 .. 27}; even ids start words.
void add_table_docs(ShardBuilder& a, ShardBuilder& b) {
  auto add = [](ShardBuilder& s, std::vector<std::vector<int32_t>> sentences) {
    std::vector<Encoding> enc;
    for (auto& ids : sentences) {
      Encoding e;
      e.ids = ids;
      for (auto id : ids) e.word_start.push_back(id % 2 == 0);
      enc.push_back(e);
    }
    s.add_document(enc);
  };
  add(a, {{5, 6, 7}, {8, 9}});
  add(a, {{10, 11, 12, 13}, {}});  // the empty sentence is dropped
  add(b, {{20, 21, 22, 23, 24, 25, 26, 27}});
}

TEST(Shard, RoundTripsIdsWordStartsAndBoundaries) {
  const auto dir = test::temp_dir();
  ShardBuilder a, b;
  add_table_docs(a, b);
  for (const int64_t vocab : {100, 70000}) {  // uint16 ids, then uint32
    const fs::path file = dir / ("v" + std::to_string(vocab) + ".shard");
    const ShardFileInfo info = a.write(file, vocab);
    EXPECT_EQ(fs::file_size(file), info.bytes);
    MappedShard m(file);
    const TokenStream& s = m.stream();
    EXPECT_EQ(s.id_bytes, vocab <= 65536 ? 2u : 4u);
    EXPECT_EQ(m.vocab_size(), vocab);
    ASSERT_EQ(s.tokens, 9);
    ASSERT_EQ(s.sentences, 3);
    ASSERT_EQ(s.documents, 2);
    const std::vector<int32_t> ids = {5, 6, 7, 8, 9, 10, 11, 12, 13};
    for (int64_t i = 0; i < 9; ++i) {
      EXPECT_EQ(s.id(i), ids[i]);
      EXPECT_EQ(s.word_start(i), ids[i] % 2 == 0);
    }
    EXPECT_EQ(m.words(), 4);
    EXPECT_EQ(s.sentence_ends[0], 3u);
    EXPECT_EQ(s.sentence_ends[1], 5u);
    EXPECT_EQ(s.sentence_ends[2], 9u);
    EXPECT_EQ(s.document_ends[0], 2u);
    EXPECT_EQ(s.document_ends[1], 3u);
    EXPECT_EQ(m.verify(&info.checksum), info.checksum);  // the checksum of the bytes on disk
  }
  // 64-byte header + 9 uint16 ids padded to 24 + 2 bit bytes padded to 8 + 3 + 2 uint64.
  EXPECT_EQ(fs::file_size(dir / "v100.shard"), 64u + 24u + 8u + 24u + 16u);
}

// The reference of ShardHasher, written out: per little-endian 64-bit word w (the tail
// zero-padded), h = (h ^ w) * K then h ^= h >> 32; finally the byte count is mixed in.
uint64_t reference_checksum(const std::string& bytes) {
  uint64_t h = 0x243F6A8885A308D3ULL;
  auto mix = [&](uint64_t w) {
    h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
    h ^= h >> 32;
  };
  for (size_t i = 0; i < bytes.size(); i += 8) {
    uint64_t w = 0;
    for (size_t b = 0; b < 8 && i + b < bytes.size(); ++b) w |= static_cast<uint64_t>(uint8_t(bytes[i + b])) << (8 * b);
    mix(w);
  }
  mix(bytes.size());
  return h;
}

TEST(Shard, ChecksumMatchesReferenceInAnyPiecesAndSeesEveryBitFlip) {
  std::string bytes(1003, '\0');
  uint32_t x = 12345;
  for (auto& c : bytes) c = static_cast<char>((x = x * 1103515245u + 12345u) >> 16);
  ShardHasher whole, pieces;
  whole.update(bytes.data(), bytes.size());
  for (size_t at = 0, step = 1; at < bytes.size(); at += step, step = step % 13 + 1)
    pieces.update(bytes.data() + at, std::min(step, bytes.size() - at));
  EXPECT_EQ(whole.value(), reference_checksum(bytes));
  EXPECT_EQ(pieces.value(), whole.value());
  for (size_t bit = 0; bit < 8 * bytes.size(); ++bit) {
    std::string flipped = bytes;
    flipped[bit / 8] = static_cast<char>(flipped[bit / 8] ^ (1 << (bit % 8)));
    ShardHasher h;
    h.update(flipped.data(), flipped.size());
    ASSERT_NE(h.value(), whole.value()) << "bit " << bit;
  }
}

TEST(Shard, TruncatedForeignAndOldFilesAreRejectedByName) {
  const auto dir = test::temp_dir();
  ShardBuilder a, b;
  add_table_docs(a, b);
  a.write(dir / "good.shard", 100);
  const std::string good = read_file(dir / "good.shard");
  auto variant = [&](const std::string& name, std::string bytes) {
    test::write_text(dir / name, bytes);
    return test::user_error([&] { MappedShard(dir / name).verify(); });
  };
  EXPECT_NE(variant("cut.shard", good.substr(0, good.size() - 1)).find("cut.shard: truncated or corrupt"),
            std::string::npos);
  EXPECT_NE(variant("tiny.shard", good.substr(0, 10)).find("tiny.shard: truncated shard"), std::string::npos);
  std::string foreign = good;
  foreign[0] = 'X';
  EXPECT_NE(variant("foreign.shard", foreign).find("foreign.shard: not an rpe-train shard (bad magic)"),
            std::string::npos);
  std::string old = good;
  old[8] = 9;  // version 9
  EXPECT_NE(variant("old.shard", old).find("old.shard: shard format version 9"), std::string::npos);
  std::string bad_id = good;
  bad_id[64] = 120;  // first id 120 >= vocab 100
  EXPECT_NE(variant("badid.shard", bad_id).find("outside the vocabulary"), std::string::npos);
  EXPECT_NE(test::user_error([&] { MappedShard m(dir / "missing.shard"); }).find("missing.shard: cannot open"),
            std::string::npos);
}

TEST(Packing, HandComputedTableAcrossShards) {
  ShardBuilder a, b;
  add_table_docs(a, b);
  const SpecialIds sp{0, 1, 2, 3, 4};
  const auto cross = pack_streams({a.view(), b.view()}, sp, 8, Packing::full_sentences);
  const std::vector<int32_t> want_cross = {2, 5,  6,  7,  8,  9,  3,  0,   // doc0 (+[SEP] would not fit)
                                           2, 10, 11, 12, 13, 3,  20, 3,   // doc1 [SEP] then doc2 starts
                                           2, 21, 22, 23, 24, 25, 26, 3,   // an over-long sentence is split
                                           2, 27, 3,  3,  0,  0,  0,  0};  // doc end [SEP], then the final one
  EXPECT_EQ(cross.tokens, want_cross);
  const auto docs = pack_streams({a.view(), b.view()}, sp, 8, Packing::doc_sentences);
  const std::vector<int32_t> want_docs = {2, 5,  6,  7,  8,  9,  3, 0,  2, 10, 11, 12, 13, 3, 0, 0,
                                          2, 20, 21, 22, 23, 24, 25, 3, 2, 26, 27, 3,  0,  0, 0, 0};
  EXPECT_EQ(docs.tokens, want_docs);
  // contiguous cuts where full_sentences would too here: the same table.
  EXPECT_EQ(pack_streams({a.view(), b.view()}, sp, 8, Packing::contiguous).tokens, want_cross);
  for (size_t i = 0; i < cross.tokens.size(); ++i) {
    const int32_t t = cross.tokens[i];
    EXPECT_EQ(cross.word_start[i], t > 4 && t % 2 == 0) << i;
  }
}

TEST(Packing, ContiguousCutsSentencesThatFullSentencesMovesOn) {
  // Room 6 (L = 8): the 4-token sentence does not fit after the 3-token one. full_sentences
  // starts a new sequence (3 slots of padding); contiguous cuts it, and the next document
  // follows its [SEP] in the same sequence.
  ShardBuilder s;
  auto add = [&](std::vector<std::vector<int32_t>> sentences) {
    std::vector<Encoding> enc;
    for (auto& ids : sentences) {
      Encoding e;
      e.ids = ids;
      e.word_start.assign(ids.size(), 1);
      enc.push_back(e);
    }
    s.add_document(enc);
  };
  add({{5, 6, 7}, {8, 9, 10, 11}});
  add({{12, 13, 14}});
  const SpecialIds sp{0, 1, 2, 3, 4};
  const std::vector<int32_t> want_full = {2, 5,  6,  7,  3,  0, 0, 0,   // [8..11] would not fit: next sequence
                                          2, 8,  9,  10, 11, 3, 3, 0,   // doc end [SEP]; doc1 would not fit
                                          2, 12, 13, 14, 3,  3, 0, 0};
  EXPECT_EQ(pack_streams({s.view()}, sp, 8, Packing::full_sentences).tokens, want_full);
  const std::vector<int32_t> want_cut = {2, 5,  6, 7,  8,  9,  10, 3,   // full: the sentence is cut
                                         2, 11, 3, 12, 13, 14, 3,  0};  // its end, [SEP], doc1 (its [SEP]
                                                                        // would take the last slot)
  const auto cut = pack_streams({s.view()}, sp, 8, Packing::contiguous);
  EXPECT_EQ(cut.tokens, want_cut);
  EXPECT_EQ(cut.real_tokens(), 15);  // 16 slots, one [PAD] (full_sentences: 17 of 24)
}

class PrepareTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir();
    d_.tokenizer = "wordpiece";
    d_.tokenizer_model = test::write_tiny_vocab(dir_).string();
    d_.valid_fraction = 0.1;
    d_.shard_tokens = 50000;
    // ~2.6 MB in two files, so files span several 1 MB units and shards.
    test::write_text(dir_ / "a.txt", test::random_corpus(9000, 1));
    test::write_text(dir_ / "b.txt", test::random_corpus(4000, 2));
    d_.train_files = {(dir_ / "a.txt").string(), (dir_ / "b.txt").string()};
    tok_ = std::make_unique<WordPieceTokenizer>(d_.tokenizer_model, true);
  }
  fs::path dir_;
  DataOptions d_;
  std::unique_ptr<WordPieceTokenizer> tok_;
};

TEST_F(PrepareTest, ShardsPackLikeTheTextPathAndRerunsAreNoOps) {
  const PrepareSummary s = prepare_data(d_, *tok_, {dir_ / "out", 3, false});
  EXPECT_FALSE(s.up_to_date);
  EXPECT_EQ(s.documents, 13000);
  EXPECT_GT(s.train_shards, 1);
  // The text path: every 10th document (over both files, in order) is held out.
  std::vector<Document> train, valid;
  int64_t tokens = 0, words = 0, index = 0;
  for (const auto& f : d_.train_files)
    for (auto& doc : read_documents(f)) {
      for (const auto& sentence : doc.sentences) {
        const Encoding e = tok_->encode(sentence);
        tokens += static_cast<int64_t>(e.ids.size());
        for (auto w : e.word_start) words += w;
      }
      (index++ % 10 == 9 ? valid : train).push_back(std::move(doc));
    }
  EXPECT_EQ(s.tokens, tokens);
  EXPECT_EQ(s.words, words);
  EXPECT_EQ(s.valid_documents, 1300);
  const PreparedShards shards = open_prepared(dir_ / "out", *tok_);
  for (const Packing packing : {Packing::full_sentences, Packing::doc_sentences, Packing::contiguous}) {
    const auto from_shards = pack_streams(PreparedShards::streams(shards.train), tok_->special(), 64, packing);
    const auto from_text = pack_documents(train, *tok_, 64, packing);
    EXPECT_EQ(from_shards.tokens, from_text.tokens) << packing_name(packing);
    EXPECT_EQ(from_shards.word_start, from_text.word_start) << packing_name(packing);
  }
  EXPECT_EQ(pack_streams(PreparedShards::streams(shards.valid), tok_->special(), 64, Packing::full_sentences).tokens,
            pack_documents(valid, *tok_, 64, Packing::full_sentences).tokens);

  // Unchanged inputs: nothing to do. Forced with one thread: byte-identical shards.
  EXPECT_TRUE(prepare_data(d_, *tok_, {dir_ / "out", 3, false}).up_to_date);
  std::map<std::string, std::string> before;
  for (const auto& e : fs::directory_iterator(dir_ / "out"))
    if (e.path().extension() == ".shard") before[e.path().filename().string()] = read_file(e.path());
  EXPECT_FALSE(prepare_data(d_, *tok_, {dir_ / "out", 1, true}).up_to_date);
  for (const auto& [name, bytes] : before) EXPECT_EQ(read_file(dir_ / "out" / name), bytes) << name;
  // A changed setting rebuilds.
  d_.valid_fraction = 0.2;
  EXPECT_FALSE(prepare_data(d_, *tok_, {dir_ / "out", 2, false}).up_to_date);
}

TEST_F(PrepareTest, BadInputsNameTheFile) {
  std::string text = test::random_corpus(9000, 3);  // > 1 MB: the bad byte is in a later unit
  const size_t at = text.size() - 1000;
  text[at] = static_cast<char>(0xFF);
  test::write_text(dir_ / "bad.txt", text);
  d_.train_files = {(dir_ / "a.txt").string(), (dir_ / "bad.txt").string()};
  EXPECT_EQ(test::user_error([&] { prepare_data(d_, *tok_, {dir_ / "out", 2, false}); }),
            (dir_ / "bad.txt").string() + ": invalid UTF-8 at byte offset " + std::to_string(at));
  test::write_text(dir_ / "empty.txt", "");
  d_.train_files = {(dir_ / "empty.txt").string()};
  EXPECT_EQ(test::user_error([&] { prepare_data(d_, *tok_, {dir_ / "out", 2, false}); }),
            (dir_ / "empty.txt").string() + ": file is empty");
  test::write_text(dir_ / "blank.txt", "\n  \n\n");
  d_.train_files = {(dir_ / "blank.txt").string()};
  EXPECT_NE(test::user_error([&] { prepare_data(d_, *tok_, {dir_ / "out", 2, false}); }).find("only blank lines"),
            std::string::npos);
  d_.train_files = {(dir_ / "nope.txt").string()};
  EXPECT_EQ(test::user_error([&] { prepare_data(d_, *tok_, {dir_ / "out", 2, false}); }),
            (dir_ / "nope.txt").string() + ": file not found");
  EXPECT_NE(test::user_error([&] { open_prepared(dir_ / "nowhere", *tok_); }).find("no manifest.json"),
            std::string::npos);
}

// A manifest listing one shard twice made training read it twice (542 sequences for 271), exit
// 0: refused naming manifest.json, whatever the spelling of the second entry or its split.
TEST_F(PrepareTest, AShardListedTwiceInTheManifestIsRefused) {
  d_.train_files = {(dir_ / "b.txt").string()};
  prepare_data(d_, *tok_, {dir_ / "out", 2, false});
  const fs::path m = dir_ / "out" / "manifest.json";
  const nlohmann::json good = nlohmann::json::parse(read_file(m));
  const size_t shards = good["shards"]["train"].size();
  ASSERT_GE(shards, 1u);
  ASSERT_GE(good["shards"]["valid"].size(), 1u);
  const std::string first = good["shards"]["train"][0]["file"].get<std::string>();
  auto with_extra = [&](const char* split, const std::string& spelling) {
    nlohmann::json j = good;
    nlohmann::json entry = good["shards"]["train"][0];
    entry["file"] = spelling;
    j["shards"][split].push_back(entry);
    write_file_atomic(m, j.dump(2));
    return test::user_error([&] { open_prepared(dir_ / "out", *tok_); });
  };
  const std::string tail = "; its sequences would be read twice (rerun prepare-data)";
  EXPECT_EQ(with_extra("train", first), m.string() + ": shard " + first + " is listed more than once (train)" + tail);
  EXPECT_EQ(with_extra("train", "./" + first),
            m.string() + ": shard ./" + first + " is listed more than once (train)" + tail);
  EXPECT_EQ(with_extra("valid", first), m.string() + ": shard " + first + " is listed more than once (valid)" + tail);
  write_file_atomic(m, good.dump(2));
  EXPECT_EQ(open_prepared(dir_ / "out", *tok_).train.size(), shards);
}

// Non-regular inputs are refused by name before they are opened: a FIFO blocked every reader
// below forever (the guard releases a reader that opens it anyway, so this fails, not hangs),
// and read_file returned "" for a folder.
TEST_F(PrepareTest, NonRegularInputsAreRefusedByName) {
  test::FifoGuard fifo(dir_ / "pipe.txt");
  const std::string want = "cannot read " + fifo.path().string() + ": a FIFO (named pipe), not a regular file";
  EXPECT_EQ(test::user_error([&] { read_file(fifo.path()); }), want);
  EXPECT_EQ(test::user_error([&] { read_documents(fifo.path()); }), want);
  EXPECT_EQ(test::user_error([&] { WordPieceTokenizer(fifo.path(), true); }), want);
  EXPECT_EQ(test::user_error([&] { SentencePieceTokenizer{fifo.path()}; }), want);
  d_.train_files = {fifo.path().string()};
  EXPECT_EQ(test::user_error([&] { prepare_data(d_, *tok_, {dir_ / "out", 2, false}); }), want);
  EXPECT_EQ(test::user_error([&] { read_file(dir_); }), "cannot read " + dir_.string() + ": a folder, not a file");
}

// The text path keeps the whole corpus in every rank's memory: above the limit a warning names
// the text's size, the memory it takes and the remedy (prepare-data, data.shards); at or below
// it, none. A FIFO or a missing file counts nothing (their readers say what is wrong).
TEST_F(PrepareTest, ALargeTextCorpusWithoutShardsIsWarnedAbout) {
  const auto file = dir_ / "big.txt";
  std::ofstream(file) << std::string(3000, 'a') << "\n";
  DataOptions d;
  d.train_files = {file.string(), (dir_ / "missing.txt").string()};
  d.valid_files = {file.string()};  // 6002 bytes in all
  EXPECT_EQ(text_path_warning(d, 6002), "");
  EXPECT_EQ(text_path_warning(d, 6001),
            "data.train_files/valid_files hold 0.0 GB of text, read, tokenized and packed into the memory of every "
            "rank at every start (~0.0 GB each, ~18 bytes a token): for a corpus this size run `rpe-train "
            "prepare-data` once and set data.shards (docs/data.md)");
  EXPECT_EQ(text_path_warning(d), "");  // the default limit: 256 MiB
}

}  // namespace
}  // namespace rpe
