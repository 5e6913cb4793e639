// Streaming prepare-data at scale: shards of the shared real corpora read lazily equal the
// in-memory text path token for token; one-document-per-line and gzip inputs; the format
// named in the error when a file looks like the other; an interrupted run leaves nothing a
// later run trusts; a flipped bit in a shard is caught by the manifest's checksum; reading
// shards (verification, index build, batches) leaves none of their pages in the resident set.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>

#include "data/corpus.h"
#include "data/mlm_dataset.h"
#include "data/packing.h"
#include "data/prepare.h"
#include "data/shard_sequences.h"
#include "data/text_reader.h"
#include "data/wordpiece_tokenizer.h"
#include "data_test_util.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "test_paths.h"

namespace rpe {
namespace {
namespace fs = std::filesystem;

void write_gzip(const fs::path& file, const std::string& text) {
  gzFile gz = gzopen(file.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  ASSERT_EQ(gzwrite(gz, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  gzclose(gz);
}

std::map<std::string, std::string> shard_bytes(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".shard") out[e.path().filename().string()] = read_file(e.path());
  return out;
}

// Every sequence of `lazy` equals row i of `packed`.
void expect_equal_sequences(const SequenceSource& lazy, const PackedSequences& packed) {
  ASSERT_EQ(lazy.size(), packed.size());
  const int64_t L = packed.seq_len;
  std::vector<int32_t> t(static_cast<size_t>(L));
  std::vector<uint8_t> w(static_cast<size_t>(L));
  for (int64_t i = 0; i < lazy.size(); ++i) {
    lazy.read(i, t.data(), w.data());
    ASSERT_TRUE(std::equal(t.begin(), t.end(), packed.tokens.begin() + i * L)) << "sequence " << i;
    ASSERT_TRUE(std::equal(w.begin(), w.end(), packed.word_start.begin() + i * L)) << "sequence " << i;
  }
}

TEST(PrepareStream, SharedCorporaFromShardsEqualTheInMemoryTextPath) {
  const fs::path shared = fs::path(rpe::test::source_dir()) / "../shared/data";
  if (!fs::exists(shared / "corpus/brown.txt") || !fs::exists(shared / "vocab/uncased/vocab.txt"))
    GTEST_SKIP() << "no ../shared/data";
  const fs::path dir = test::temp_dir();
  DataOptions d;
  d.tokenizer = "wordpiece";
  d.tokenizer_model = (shared / "vocab/uncased/vocab.txt").string();
  d.train_files = {(shared / "corpus/brown.txt").string(), (shared / "corpus/nlp-corpus.txt").string()};
  d.valid_fraction = 0.02;
  d.shard_tokens = 1 << 20;  // several shards: sequences run across shard ends
  const WordPieceTokenizer tok(d.tokenizer_model, true);
  const PrepareSummary s = prepare_data(d, tok, {dir / "out", 0, false});
  EXPECT_EQ(s.documents, 600);  // 500 Brown samples + 100 nlp-corpus documents
  EXPECT_GT(s.train_shards, 2);
  // The text path: read whole, held-out rule of corpus.h, tokenized and packed in memory.
  std::vector<Document> train, valid;
  int64_t index = 0;
  for (const auto& f : d.train_files)
    for (auto& doc : read_documents(f)) (is_held_out(index++, holdout_period(d)) ? valid : train).push_back(doc);
  EXPECT_EQ(s.valid_documents, static_cast<int64_t>(valid.size()));
  auto shards = std::make_shared<const PreparedShards>(open_prepared(dir / "out", tok));
  for (const Packing packing : {Packing::full_sentences, Packing::doc_sentences, Packing::contiguous}) {
    ShardSequences lazy(shards, false, dir / "out", tok.special(), 512, packing);
    expect_equal_sequences(lazy, pack_documents(train, tok, 512, packing));
  }
  ShardSequences lazy_valid(shards, true, dir / "out", tok.special(), 128, Packing::full_sentences);
  expect_equal_sequences(lazy_valid, pack_documents(valid, tok, 128, Packing::full_sentences));
}

// Resident KB of this process's mappings of *.shard files (/proc/self/smaps).
double shard_rss_kb() {
  std::ifstream in("/proc/self/smaps");
  double kb = 0;
  bool shard = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Rss:", 0) == 0) {
      if (shard) kb += std::stod(line.substr(4));
    } else if (line.find(':') > line.find(' ')) {  // a mapping's header line ("start-end perms ... path")
      shard = line.size() > 6 && line.compare(line.size() - 6, 6, ".shard") == 0;
    }
  }
  return kb;
}

class StreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::temp_dir();
    d_.tokenizer = "wordpiece";
    d_.tokenizer_model = test::write_tiny_vocab(dir_).string();
    d_.valid_fraction = 0.1;
    d_.shard_tokens = 20000;
    tok_ = std::make_unique<WordPieceTokenizer>(d_.tokenizer_model, true);
  }
  PrepareSummary prepare(const std::string& out, bool force = false, int64_t fail_after = -1) {
    return prepare_data(d_, *tok_, {dir_ / out, 2, force, fail_after});
  }
  // Flips a bit of `shard` under its old size and mtime (what a stamp does not see: an open that
  // reads the shard fails on its checksum), makes its `stamp` stale, and opens `out` while a
  // child process holds the stamp's lock and then writes the stamp back, as a rank verifying the
  // shard meanwhile would. Returns the open's error: "" when it took that stamp instead of reading.
  std::string open_while_another_process_stamps(const fs::path& shard, const fs::path& stamp) {
    const std::string good = read_file(stamp);
    const auto mtime = fs::last_write_time(shard);
    std::string bytes = read_file(shard);
    bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x10);
    test::write_text(shard, bytes);
    fs::last_write_time(shard, mtime);
    fs::remove(stamp);
    const pid_t child = test::fork_holding_lock(stamp.string() + ".lock", dir_ / "child-holds-the-lock", 500000, [&] {
      std::ofstream(stamp) << good;
      return true;
    });
    if (child <= 0) return "no child";
    std::string error;
    try {
      open_prepared(dir_ / "out", *tok_);
    } catch (const UserError& e) {
      error = e.what();
    }
    int status = 0;
    EXPECT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child stamped the shard";
    return error;
  }
  fs::path dir_;
  DataOptions d_;
  std::unique_ptr<WordPieceTokenizer> tok_;
};

TEST_F(StreamTest, OneDocumentPerLineAndGzipGiveTheSameShards) {
  // 3000 documents of one line each (~1.2 MB: several chunks), plain and gzip-compressed.
  const std::string text = test::random_corpus(3000, 7);
  std::string lines;
  for (size_t start = 0; start < text.size();) {  // each blank-line document joined into one line
    size_t end = text.find("\n\n", start);
    if (end == std::string::npos) end = text.size();
    std::string doc = text.substr(start, end - start);
    std::replace(doc.begin(), doc.end(), '\n', ' ');
    lines += doc + "\n";
    start = end + 2;
  }
  test::write_text(dir_ / "lines.txt", lines);
  write_gzip(dir_ / "lines.txt.gz", lines);
  d_.document_format = "line";
  d_.train_files = {(dir_ / "lines.txt").string()};
  const PrepareSummary plain = prepare("plain");
  EXPECT_EQ(plain.documents, std::count(lines.begin(), lines.end(), '\n'));
  EXPECT_EQ(plain.valid_documents, plain.documents / 10);
  EXPECT_GT(plain.train_shards, 1);  // bounded shards, unlike one giant document
  d_.train_files = {(dir_ / "lines.txt.gz").string()};
  const PrepareSummary gz = prepare("gz");
  EXPECT_EQ(gz.tokens, plain.tokens);
  EXPECT_EQ(shard_bytes(dir_ / "gz"), shard_bytes(dir_ / "plain"));
  // The text path reads the same documents from the compressed file.
  EXPECT_EQ(read_documents(dir_ / "lines.txt.gz", "line").size(), static_cast<size_t>(plain.documents));
  // A .gz cut short (a copy that stopped halfway) is an error naming it, not half a corpus.
  std::ifstream in(dir_ / "lines.txt.gz", std::ios::binary);
  const std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  test::write_text(dir_ / "cut.txt.gz", whole.substr(0, whole.size() / 2));
  const std::string err = test::user_error([&] { read_documents(dir_ / "cut.txt.gz", "line"); });
  EXPECT_NE(err.find("cut.txt.gz: truncated or corrupt gzip file"), std::string::npos) << err;
  d_.train_files = {(dir_ / "cut.txt.gz").string()};
  EXPECT_NE(test::user_error([&] { prepare("cut"); }).find("cut.txt.gz: truncated"), std::string::npos);
}

// A line of any whitespace ends a document, as in Google's create_pretraining_data.py (Python's
// strip()): a form-feed page break, a no-break space, an ideographic space, \r\n line ends; a
// zero-width space (not whitespace to Python) is text. The text path and the shards agree.
TEST_F(StreamTest, LinesOfUnicodeWhitespaceEndDocuments) {
  const std::string text =
      "one a.\none b.\n\xc2\xa0\ntwo.\n\x0c\nthree.\r\n \t\xe3\x80\x80\xe2\x80\xa8\x0b\r\nfour.\n\xe2\x80\x8b\nfour b.\n";
  test::write_text(dir_ / "ws.txt", text);
  const auto docs = read_documents(dir_ / "ws.txt");
  ASSERT_EQ(docs.size(), 4u);
  EXPECT_EQ(docs[0].sentences, (std::vector<std::string>{"one a.", "one b."}));
  EXPECT_EQ(docs[3].sentences, (std::vector<std::string>{"four.", "\xe2\x80\x8b", "four b."}));
  d_.train_files = {(dir_ / "ws.txt").string()};
  d_.valid_fraction = 0;
  EXPECT_EQ(prepare("ws").documents, 4);
  for (const char* s : {"", " \t\r", "\xc2\x85\xe2\x80\x80\xe2\x80\x8a\xe2\x80\xaf\xe2\x81\x9f\xe1\x9a\x80\xe2\x80\xa9\x1c\x1f"})
    EXPECT_TRUE(is_blank_line(s)) << s;
  for (const char* s : {"x", " \xe2\x80\x8b", "\xef\xbb\xbf", "\xc2", "\xe3\x80", "\xf0\x9f\x98\x80", "\xc2\xa0."})
    EXPECT_FALSE(is_blank_line(s)) << s;
}

TEST_F(StreamTest, AFileInTheOtherFormatIsNamedInTheError) {
  test::write_text(dir_ / "blocks.txt", test::random_corpus(400, 3));
  d_.document_format = "line";
  d_.train_files = {(dir_ / "blocks.txt").string()};
  EXPECT_NE(test::user_error([&] { prepare("x"); }).find("read as data.document_format: line"), std::string::npos);
  // 70 MB without a blank line read as blank_line documents.
  {
    std::ofstream out(dir_ / "long.txt");
    const std::string line(1023, 'a');
    for (int i = 0; i < 70 * 1024; ++i) out << line << '\n';
  }
  d_.document_format = "blank_line";
  d_.train_files = {(dir_ / "long.txt").string()};
  const std::string e = test::user_error([&] { prepare("y"); });
  EXPECT_NE(e.find("long.txt: from byte 0, no blank line in 64 MB: read as data.document_format: blank_line"),
            std::string::npos) << e;
  fs::remove(dir_ / "long.txt");
  fs::create_directories(dir_ / "folder");
  d_.train_files = {(dir_ / "folder").string()};
  EXPECT_EQ(test::user_error([&] { prepare("z"); }), (dir_ / "folder").string() + ": is a folder, not a text file (list the files in it)");
  EXPECT_NE(test::user_error([&] { read_documents(dir_ / "folder"); }).find("is a folder"), std::string::npos);
  test::write_text(dir_ / "fake.gz", "plain text\n");
  d_.train_files = {(dir_ / "fake.gz").string()};
  EXPECT_NE(test::user_error([&] { prepare("w"); }).find("not gzip-compressed"), std::string::npos);
  test::write_text(dir_ / "one.gz", "x");  // one byte: no gzip file (it was read as the text "x")
  d_.train_files = {(dir_ / "one.gz").string()};
  EXPECT_NE(test::user_error([&] { prepare("v"); }).find("one.gz: named .gz but not gzip-compressed"), std::string::npos);
}

TEST_F(StreamTest, InterruptedRunLeavesNothingTrusted) {
  test::write_text(dir_ / "a.txt", test::random_corpus(3000, 1));
  d_.train_files = {(dir_ / "a.txt").string()};
  const PrepareSummary complete = prepare("ref");
  const auto want = shard_bytes(dir_ / "ref");
  ASSERT_GT(want.size(), 3u);
  prepare("out");
  d_.valid_fraction = 0.2;  // a changed setting: the rebuild fails after its first shard
  EXPECT_THROW(prepare("out", false, 1), std::runtime_error);
  EXPECT_TRUE(fs::exists(dir_ / "out" / "train-00000.shard"));
  EXPECT_FALSE(fs::exists(dir_ / "out" / "manifest.json"));
  EXPECT_NE(test::user_error([&] { open_prepared(dir_ / "out", *tok_); }).find("no manifest.json"), std::string::npos);
  d_.valid_fraction = 0.1;
  const PrepareSummary again = prepare("out");  // not "up to date": rebuilt whole
  EXPECT_FALSE(again.up_to_date);
  EXPECT_EQ(again.tokens, complete.tokens);
  EXPECT_EQ(shard_bytes(dir_ / "out"), want);
  EXPECT_TRUE(prepare("out").up_to_date);
}

// --threads 100000 spent ~18 s starting threads, then died and left the output folder empty.
// Out-of-range counts are refused before the output is touched.
TEST_F(StreamTest, AbsurdThreadCountsAreRefusedBeforeTheOutputIsCleared) {
  test::write_text(dir_ / "a.txt", test::random_corpus(200, 1));
  d_.train_files = {(dir_ / "a.txt").string()};
  prepare("out");
  for (const int threads : {100000, 1025, -1})
    EXPECT_EQ(test::user_error([&] { prepare_data(d_, *tok_, {dir_ / "out", threads, true}); }),
              "prepare-data: --threads " + std::to_string(threads) + " is out of range (0 = all cores, at most 1024)");
  EXPECT_TRUE(prepare("out").up_to_date);  // the manifest and shards are still there
}

// Training reads the shards: the text may be deleted once prepared (docs/data.md), and the
// tokenizer is its vocabulary's content, not the path it was read from. A changed text file
// (another size) still makes the shards out of date.
TEST_F(StreamTest, ShardsOutliveTheirTextAndFollowTheVocabularysContent) {
  test::write_text(dir_ / "a.txt", test::random_corpus(500, 3));
  d_.train_files = {(dir_ / "a.txt").string()};
  prepare("out");
  EXPECT_EQ(shards_out_of_date(dir_ / "out", d_, *tok_), "");
  fs::create_directories(dir_ / "elsewhere");
  fs::copy_file(d_.tokenizer_model, dir_ / "elsewhere" / "vocab.txt");
  DataOptions copied = d_;
  copied.tokenizer_model = (dir_ / "elsewhere" / "vocab.txt").string();
  EXPECT_EQ(shards_out_of_date(dir_ / "out", copied, *tok_), "");
  test::write_text(dir_ / "a.txt", test::random_corpus(400, 3));
  EXPECT_NE(shards_out_of_date(dir_ / "out", d_, *tok_).find("a.txt changed"), std::string::npos);
  fs::remove(dir_ / "a.txt");
  EXPECT_EQ(shards_out_of_date(dir_ / "out", d_, *tok_), "");
  // prepare-data too (scripts run it before every run); only a rebuild needs the text, and says so
  // before it clears anything.
  EXPECT_TRUE(prepare("out").up_to_date);
  EXPECT_NE(test::user_error([&] { prepare("out", /*force=*/true); }).find("a.txt: file not found"), std::string::npos);
  EXPECT_EQ(shards_out_of_date(dir_ / "out", d_, *tok_), "");
}

// The same text is the same input whatever names or touches it: another spelling of its path,
// a new mtime, a copy on another disk (a job staging the corpus to a node's scratch) match the
// shards; content is compared with the checksum prepare-data recorded, once (a stamp remembers).
// Before, each of these stopped every start, a long run's --resume included, with "changed".
TEST_F(StreamTest, TheSameTextMovedOrTouchedStillMatchesItsShards) {
  const fs::path text = dir_ / "a.txt", out = dir_ / "out";
  test::write_text(text, test::random_corpus(500, 4));
  d_.train_files = {text.string()};
  prepare("out");
  fs::create_directories(dir_ / "sub");
  DataOptions respelled = d_;
  respelled.train_files = {(dir_ / "sub" / ".." / "a.txt").string()};
  EXPECT_EQ(shards_out_of_date(out, respelled, *tok_), "");
  const auto stamps = [&] {
    int n = 0;
    for (const auto& e : fs::directory_iterator(out))
      n += e.path().filename().string().rfind("input-", 0) == 0 && e.path().extension() == ".verified";
    return n;
  };
  EXPECT_EQ(stamps(), 0);  // size and mtime matched: nothing was read
  fs::last_write_time(text, fs::last_write_time(text) + std::chrono::seconds(5));
  EXPECT_EQ(shards_out_of_date(out, d_, *tok_), "");
  EXPECT_EQ(stamps(), 1);  // its content was compared, and that is remembered
  EXPECT_TRUE(prepare("out").up_to_date);  // prepare-data too: no rebuild of a touched corpus

  fs::create_directories(dir_ / "scratch");
  const fs::path copy = dir_ / "scratch" / "a.txt";
  fs::copy_file(text, copy);
  fs::last_write_time(copy, fs::last_write_time(text) + std::chrono::seconds(9));
  DataOptions staged = d_;
  staged.train_files = {copy.string()};
  EXPECT_EQ(shards_out_of_date(out, staged, *tok_), "");
  EXPECT_EQ(stamps(), 2);
  // Another node's copy at the same path has its own mtime, and its own stamp: the two do not
  // replace each other's (each start would read the corpus again on every node but the last).
  const auto node_b = fs::last_write_time(text) + std::chrono::seconds(20);
  fs::last_write_time(copy, node_b);
  EXPECT_EQ(shards_out_of_date(out, staged, *tok_), "");
  EXPECT_EQ(stamps(), 3);

  std::string bytes = read_file(copy);  // the same size, another content: changed
  bytes[bytes.size() / 2] = bytes[bytes.size() / 2] == 'x' ? 'y' : 'x';
  test::write_text(copy, bytes);
  const std::string other = copy.string() + " is not the file the shards were prepared from (" + text.string() +
                            "): the same size, another content";
  EXPECT_EQ(shards_out_of_date(out, staged, *tok_), other);
  // ... even with the prepared file's mtime (two parts of a split corpus, mtimes restored to the
  // second): at another path, size and mtime prove nothing.
  fs::last_write_time(copy, fs::last_write_time(text));
  EXPECT_EQ(shards_out_of_date(out, staged, *tok_), other);
  bytes[bytes.size() / 2] = 'z';  // ... and in place: changed
  test::write_text(text, bytes);
  EXPECT_EQ(shards_out_of_date(out, d_, *tok_), text.string() + " changed (the same size, another content)");
  fs::remove(copy);  // gone from another path than the shards were prepared from: not theirs
  EXPECT_EQ(shards_out_of_date(out, staged, *tok_),
            copy.string() + ": file not found (the shards were prepared from " + text.string() + ")");
}

// A manifest without content checksums (older rpe-train) cannot tell a touched file from an
// edited one: changed, as before.
TEST_F(StreamTest, AManifestWithoutChecksumsCallsATouchedInputChanged) {
  const fs::path text = dir_ / "a.txt", out = dir_ / "out";
  test::write_text(text, test::random_corpus(300, 5));
  d_.train_files = {text.string()};
  prepare("out");
  nlohmann::json m = nlohmann::json::parse(read_file(out / "manifest.json"));
  ASSERT_TRUE(m["inputs"][0].contains("checksum"));
  m["inputs"][0].erase("checksum");
  test::write_text(out / "manifest.json", m.dump(2));
  EXPECT_EQ(shards_out_of_date(out, d_, *tok_), "");
  fs::last_write_time(text, fs::last_write_time(text) + std::chrono::seconds(5));
  EXPECT_EQ(shards_out_of_date(out, d_, *tok_),
            text.string() + " changed (the manifest records no checksum to compare it by)");
}

TEST_F(StreamTest, ABitFlipInAShardIsDetected) {
  test::write_text(dir_ / "a.txt", test::random_corpus(2000, 2));
  d_.train_files = {(dir_ / "a.txt").string()};
  prepare("out");
  open_prepared(dir_ / "out", *tok_);  // verifies once, leaves stamps
  const fs::path shard = dir_ / "out" / "train-00001.shard";
  ASSERT_TRUE(fs::exists(fs::path(shard.string() + ".verified")));
  std::string bytes = read_file(shard);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x10);
  test::write_text(shard, bytes);
  const auto later = fs::last_write_time(shard) + std::chrono::seconds(2);  // mtime moves on a write
  fs::last_write_time(shard, later);
  const std::string e = test::user_error([&] { open_prepared(dir_ / "out", *tok_); });
  EXPECT_NE(e.find("train-00001.shard: checksum"), std::string::npos) << e;
  EXPECT_NE(e.find("differs from the manifest"), std::string::npos) << e;
  EXPECT_TRUE(prepare("out").up_to_date);  // same size, inputs unchanged: prepare trusts stat(), --verify does not
  EXPECT_NE(test::user_error([&] { open_prepared(dir_ / "out", *tok_, true); }).find("checksum"), std::string::npos);
}

// A shard folder this process cannot write, whose stamps do not match (copied without its
// mtimes; here each stamp's name is taken by a folder, which stops root as well): the stamps go
// to the cache folder (RPE_TRAIN_CACHE_DIR), so the next open only stats the shards. Before,
// every open on every rank verified every shard again: the whole corpus read at each start.
TEST_F(StreamTest, AShardFolderThatCannotTakeStampsIsVerifiedOnlyOnce) {
  test::write_text(dir_ / "a.txt", test::random_corpus(2000, 2));
  d_.train_files = {(dir_ / "a.txt").string()};
  prepare("out");
  int shards = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "out"))
    if (e.path().extension() == ".shard") {
      ++shards;
      fs::remove(e.path().string() + ".verified");
      fs::create_directories(e.path().string() + ".verified");
    }
  ::setenv("RPE_TRAIN_CACHE_DIR", (dir_ / "cache").c_str(), 1);
  open_prepared(dir_ / "out", *tok_);  // verifies every shard, stamps them in the cache folder
  // A change that keeps size and mtime is what a stamp does not see: an open that reads the
  // shard again finds it, one that trusts the stamp does not.
  const fs::path shard = dir_ / "out" / "train-00000.shard";
  const auto mtime = fs::last_write_time(shard);
  std::string bytes = read_file(shard);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 0x10);
  test::write_text(shard, bytes);
  fs::last_write_time(shard, mtime);
  EXPECT_NO_THROW(open_prepared(dir_ / "out", *tok_)) << "verified again: the stamps were not kept";
  EXPECT_NE(test::user_error([&] { open_prepared(dir_ / "out", *tok_, true); }).find("checksum"), std::string::npos);
  ::unsetenv("RPE_TRAIN_CACHE_DIR");
  int stamps = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "cache")) stamps += e.path().filename().string().rfind("verified-", 0) == 0;
  EXPECT_EQ(stamps, shards);
}

// A stale stamp (shards touched, or copied without their mtimes) on every rank at once: one
// process verifies a shard under its lock, the others wait and take its stamp instead of reading
// the shard too (64 ranks x 11 GB from one file system at paper scale). Here this test holds the
// lock, writes the stamp as the verifying process would and lets go: the waiting open must take
// that stamp. The shard has a bit flipped under its old size and mtime, so an open that read it
// again fails on its checksum; the stamp is what says it was read.
TEST_F(StreamTest, AShardAnotherProcessVerifiesMeanwhileIsNotReadAgain) {
  test::write_text(dir_ / "a.txt", test::random_corpus(2000, 2));
  d_.train_files = {(dir_ / "a.txt").string()};
  prepare("out");
  open_prepared(dir_ / "out", *tok_);  // stamps every shard
  const fs::path shard = dir_ / "out" / "train-00000.shard", stamp = shard.string() + ".verified";
  const std::string error = open_while_another_process_stamps(shard, stamp);
  EXPECT_EQ(error, "") << "the shard was read again instead of its fresh stamp taken";
  fs::remove(stamp);
  EXPECT_NE(test::user_error([&] { open_prepared(dir_ / "out", *tok_); }).find("checksum"), std::string::npos);
}

// The same in a shard folder that takes neither stamps nor lock files (read-only; here their
// names are taken by folders, which stops root as well): the lock lies beside the stamp in the
// cache folder, and the process that waited there takes the stamp the other wrote.
TEST_F(StreamTest, AReadOnlyShardFolderIsVerifiedUnderALockInTheCacheFolder) {
  test::write_text(dir_ / "a.txt", test::random_corpus(2000, 2));
  d_.train_files = {(dir_ / "a.txt").string()};
  prepare("out");
  const fs::path shard = dir_ / "out" / "train-00000.shard";
  for (const auto& e : fs::directory_iterator(dir_ / "out"))
    if (e.path().extension() == ".shard")
      for (const std::string suffix : {".verified", ".verified.lock"}) {
        fs::remove(e.path().string() + suffix);
        fs::create_directories(e.path().string() + suffix);
      }
  ::setenv("RPE_TRAIN_CACHE_DIR", (dir_ / "cache").c_str(), 1);
  open_prepared(dir_ / "out", *tok_);  // verifies every shard, stamps them in the cache folder
  fs::path stamp;  // train-00000.shard's there: it names the shard
  for (const auto& e : fs::directory_iterator(dir_ / "cache"))
    if (e.path().filename().string().rfind("verified-", 0) == 0 && e.path().extension() != ".lock" &&
        read_file(e.path()).find(fs::absolute(shard).string()) != std::string::npos)
      stamp = e.path();
  ASSERT_FALSE(stamp.empty());
  const std::string error = open_while_another_process_stamps(shard, stamp);
  ::unsetenv("RPE_TRAIN_CACHE_DIR");
  EXPECT_EQ(error, "") << "the shard was read again instead of its fresh stamp taken";
}

TEST_F(StreamTest, ReadingShardsLeavesNoneOfTheirPagesResident) {
  // Mapped file pages count in a process's RSS like its heap: a rank that kept the pages it has
  // read would grow with the corpus. The kernel maps 64 KB around each page fault.
  test::write_text(dir_ / "a.txt", test::random_corpus(20000, 5));
  d_.train_files = {(dir_ / "a.txt").string()};
  d_.shard_tokens = 1 << 20;
  ASSERT_GT(prepare("out").train_shards, 2);
  auto shards = std::make_shared<const PreparedShards>(open_prepared(dir_ / "out", *tok_, /*verify_all=*/true));
  EXPECT_LT(shard_rss_kb(), 256) << "after verifying every shard";
  auto seqs = std::make_shared<ShardSequences>(shards, false, dir_ / "out", tok_->special(), 64, Packing::full_sentences);
  ASSERT_FALSE(seqs->index_from_cache());
  EXPECT_LT(shard_rss_kb(), 256) << "after building the index";
  std::vector<int32_t> t(64);
  std::vector<uint8_t> w(64);
  for (int64_t i = 0; i < seqs->size(); i += 97) seqs->read(i, t.data(), w.data());
  EXPECT_LT(shard_rss_kb(), 256) << "each read releases the pages it touched";
  int64_t sum = 0;  // touching the maps directly does leave pages (the check would see them)
  for (const auto& shard : shards->train)
    for (int64_t i = 0; i < shard->stream().tokens; i += 512) sum += shard->stream().id(i);
  EXPECT_GT(sum, 0);
  EXPECT_GT(shard_rss_kb(), 1024);
  seqs->release_pages();
  EXPECT_LT(shard_rss_kb(), 256) << "after release_pages";
  MlmLoader loader(seqs, *tok_, {MaskingOptions{}, 16, 1, true});
  for (int k = 0; k < 20; ++k) loader.next();
  EXPECT_LT(shard_rss_kb(), 256) << "the loader releases each batch's pages";
}

}  // namespace
}  // namespace rpe
