// SentencePiece training reads the corpus the way the rest of the data path does: a .gz copy
// trains the same vocabulary as the plain file, data.document_format is honoured, documents
// longer than the trainer's sentence limit (one article per line) still count, file names may
// hold commas and spaces, the same files always give the same vocabulary, and bad input is
// one UserError naming the file.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>

#include "data/sp_tokenizer.h"
#include "data_test_util.h"
#include "util/errors.h"
#include "test_paths.h"

namespace rpe {
namespace {
namespace fs = std::filesystem;

// The first `lines` lines of the sample corpus (blank lines between documents).
std::string sample_text(int lines) {
  std::ifstream in(fs::path(test::source_dir()) / "data/sample/corpus.txt");
  std::string text, line;
  for (int i = 0; i < lines && std::getline(in, line); ++i) text += line + "\n";
  return text;
}

fs::path write(const std::string& name, const std::string& text) {
  const fs::path file = test::process_temp_dir() / name;
  std::ofstream(file, std::ios::binary) << text;
  return file;
}

fs::path write_gzip(const std::string& name, const std::string& text) {
  const fs::path file = test::process_temp_dir() / name;
  gzFile gz = gzopen(file.c_str(), "wb");
  EXPECT_NE(gz, nullptr);
  EXPECT_EQ(gzwrite(gz, text.data(), static_cast<unsigned>(text.size())), static_cast<int>(text.size()));
  gzclose(gz);
  return file;
}

fs::path train(const std::vector<fs::path>& files, const std::string& name, const std::string& format = "blank_line") {
  std::vector<std::string> paths;
  for (const auto& f : files) paths.push_back(f.string());
  const fs::path model = test::process_temp_dir() / (name + ".model");
  train_sentencepiece(paths, format, model, 300, true);
  return model;
}

std::vector<std::string> pieces(const fs::path& model) {
  SentencePieceTokenizer t(model);
  std::vector<std::string> out;
  for (int32_t id = 0; id < static_cast<int32_t>(t.vocab_size()); ++id) out.push_back(t.piece(id));
  return out;
}

// Pieces of `text` under `model`, space-separated.
std::string encode(const fs::path& model, const std::string& text) {
  SentencePieceTokenizer t(model);
  std::string out;
  for (int32_t id : t.encode(text).ids) {
    if (!out.empty()) out += ' ';
    out += t.piece(id);
  }
  return out;
}

// A sentence of the sample corpus, and whether `model` cuts it into pieces of words, at most
// one per two characters, rather than letters (what a vocabulary of gzip bytes gives).
constexpr const char* kSentence = "anna reads a book on monday and the snow falls .";
bool pieces_of_words(const fs::path& model) {
  const std::string pieces = encode(model, kSentence);
  const auto n = std::count(pieces.begin(), pieces.end(), ' ') + 1;
  return 2 * n <= static_cast<long>(std::string(kSentence).size());
}

TEST(SentencePieceTraining, GzipCorpusTrainsTheSameVocabularyAsThePlainFileEveryTime) {
  const std::string text = sample_text(6000);
  const auto plain = train({write("corpus.txt", text)}, "plain");
  const auto again = train({write("corpus.txt", text)}, "again");
  const auto gz = train({write_gzip("corpus.txt.gz", text)}, "gz");
  const auto vocab = pieces(plain);
  EXPECT_GE(vocab.size(), 200u);
  EXPECT_EQ(pieces(again), vocab);  // a fixed sampling seed: one corpus, one vocabulary
  EXPECT_EQ(pieces(gz), vocab);     // compressed bytes would give pieces of gzip noise
  EXPECT_EQ(encode(gz, kSentence), encode(plain, kSentence));
  EXPECT_TRUE(pieces_of_words(plain)) << encode(plain, kSentence);
}

TEST(SentencePieceTraining, LineFormatDocumentsLongerThanTheTrainersLimitStillCount) {
  // One document per line, each ~9 KB: over the trainer's 4,192-byte sentence limit, so it
  // would drop every line (and fail) unless they are cut into sentences first.
  std::istringstream in(sample_text(6000));
  std::string line, doc, text;
  int documents = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    doc += (doc.empty() ? "" : " ") + line;
    if (doc.size() > 9000) text += doc + "\n", doc.clear(), ++documents;
  }
  ASSERT_GE(documents, 20);
  const auto model = train({write("articles.txt", text)}, "articles", "line");
  EXPECT_TRUE(pieces_of_words(model)) << encode(model, kSentence);
  // Cut into pieces of at most 256 bytes, which bounds the trainer's 2 M-sentence sample (and its
  // memory, ~17x the sample) at ~0.5 GB of text whatever the corpus's layout: cut at 4 KB, 2 M
  // lines of documents asked ~140 GB.
  const int64_t sentences =
      train_sentencepiece({(test::process_temp_dir() / "articles.txt").string()}, "line",
                          test::process_temp_dir() / "articles2.model", 300, true);
  EXPECT_GE(sentences, static_cast<int64_t>(text.size() / 256));
  EXPECT_LE(sentences, static_cast<int64_t>(text.size() / 128));
}

TEST(SentencePieceTraining, FileNamesWithCommasAndSpacesAreReadAsGiven) {
  const auto model = train({write("part 1, early.txt", sample_text(3000)), write("part 2.txt", sample_text(6000))},
                           "named");
  EXPECT_GE(pieces(model).size(), 200u);
}

TEST(SentencePieceTraining, BadFilesAreOneErrorNamingTheFile) {
  const auto good = write("good.txt", sample_text(2000));
  const auto missing = test::process_temp_dir() / "missing.txt";
  EXPECT_NE(test::user_error([&] { train({good, missing}, "m1"); }).find(missing.string() + ": file not found"),
            std::string::npos);
  const auto blank = write("blank.txt", "\n  \n\n");
  EXPECT_NE(test::user_error([&] { train({good, blank}, "m2"); }).find(blank.string() + ": no text"), std::string::npos);
  const auto bad = write("bad.txt", "fine words\nthen \xff here\n");
  EXPECT_NE(test::user_error([&] { train({good, bad}, "m3"); }).find(bad.string() + ": invalid UTF-8 at byte offset 16"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(test::process_temp_dir() / "m3.model"));  // nothing half-written
  for (const auto& e : fs::directory_iterator(test::process_temp_dir()))
    EXPECT_EQ(e.path().filename().string().find(".training."), std::string::npos) << e.path();  // nor the trainer's
}

}  // namespace
}  // namespace rpe
