// SentencePiece wrapper: training, loading, encoding with word starts and byte offsets.
#include "data/sp_tokenizer.h"

#include <sentencepiece_trainer.h>

#include <deque>
#include <memory>
#include <unordered_map>

#include "data/corpus.h"
#include "data/text_reader.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/input_file.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;

constexpr unsigned int kTrainingSeed = 20200922;  // any fixed value

SentencePieceTokenizer::SentencePieceTokenizer(const fs::path& model_file) {
  if (!fs::exists(model_file)) throw UserError(model_file.string() + ": sentencepiece model not found");
  require_regular_file(model_file);  // Load() would block on a FIFO
  const auto status = processor_.Load(model_file.string());
  if (!status.ok()) throw UserError(model_file.string() + ": not a sentencepiece model (" + status.ToString() + ")");
  special_ = SpecialIds{processor_.PieceToId("[PAD]"), processor_.unk_id(), processor_.PieceToId("[CLS]"),
                        processor_.PieceToId("[SEP]"), processor_.PieceToId("[MASK]")};
  if (special_.pad != 0 || special_.cls != 2 || special_.sep != 3 || special_.mask != 4)
    throw UserError(model_file.string() + ": sentencepiece model lacks [PAD]/[CLS]/[SEP]/[MASK] at ids 0,2,3,4 "
                    "(train it with rpe-train)");
}

Encoding SentencePieceTokenizer::encode(std::string_view text) const {
  const auto spt = processor_.EncodeAsImmutableProto(text);
  Encoding enc;
  const size_t n = spt.pieces_size();
  enc.ids.reserve(n);
  enc.word_start.reserve(n);
  enc.offsets.reserve(n);
  static const std::string kWordMark = "\xe2\x96\x81";  // U+2581
  for (size_t i = 0; i < n; ++i) {
    const auto p = spt.pieces(static_cast<int>(i));
    enc.ids.push_back(static_cast<int32_t>(p.id()));
    enc.word_start.push_back(p.piece().rfind(kWordMark, 0) == 0 ? 1 : 0);
    enc.offsets.emplace_back(static_cast<int32_t>(p.begin()), static_cast<int32_t>(p.end()));
  }
  if (!enc.word_start.empty()) enc.word_start[0] = 1;
  return enc;
}

namespace {

// The corpus as SentencePiece's trainer reads it: the sentences of `files` as the rest of the
// data path sees them (.gz decompressed, data.document_format honoured, UTF-8 checked), one
// chunk in memory at a time -- the trainer itself keeps only a sample of kSampleSentences
// sentences. A line longer than kPieceBytes (a whole document in the line format) is cut at
// spaces: the trainer would drop one over its limit, and the sample's memory is its size in
// bytes (the trainer needs ~17 times that: 260 MB for 15 MB): 2 M lines of 4 KB documents would
// have asked ~140 GB, 2 M pieces of at most 256 bytes ask at most ~9 GB (a corpus of sentences
// per line, ~120 bytes each, ~4 GB). Pieces never span a space, so cutting there changes no
// piece the trainer can learn (text without spaces, as in Chinese or Japanese, is cut every 256
// bytes instead: a piece cannot span a cut, as before every 4 KB).
class CorpusSentences : public sentencepiece::SentenceIterator {
 public:
  static constexpr size_t kPieceBytes = 256, kSampleSentences = 2000000;

  CorpusSentences(const std::vector<std::string>& files, DocumentFormat format) : files_(files), format_(format) {
    for (const auto& f : files_) ChunkReader check(f, format_);  // a missing or unreadable file fails before training
    Next();
  }
  bool done() const override { return done_; }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return status_; }
  void Next() override {
    try {
      while (queue_.empty() && !done_) refill();
    } catch (const UserError& e) {  // not thrown through the trainer: kept for train_sentencepiece
      error_ = e.what();
      status_ = sentencepiece::util::Status(sentencepiece::util::StatusCode::kInvalidArgument, error_);
      done_ = true;
    }
    if (done_) return;
    value_ = std::move(queue_.front());
    queue_.pop_front();
    ++sentences_;
  }
  const std::string& error() const { return error_; }
  int64_t sentences() const { return sentences_; }

 private:
  // The next chunk of the current file into queue_, or the next file; done_ after the last.
  void refill() {
    if (!reader_) {
      if (file_index_ == files_.size()) {
        done_ = true;
        return;
      }
      reader_ = std::make_unique<ChunkReader>(files_[file_index_], format_);
      file_sentences_ = 0;
    }
    const std::string& file = files_[file_index_];
    std::string chunk;
    uint64_t offset = 0;
    if (!reader_->next(chunk, offset)) {
      if (file_sentences_ == 0) throw UserError(file + ": no text (only blank lines)");
      reader_.reset();
      ++file_index_;
      return;
    }
    if (const size_t bad = find_invalid_utf8(chunk); bad != std::string::npos)
      throw UserError(file + ": invalid UTF-8 at byte offset " + std::to_string(offset + bad));
    split_documents(chunk, format_, [&](std::string_view line) { push_cut(line); }, [] {});
  }

  // `line` in pieces of at most kPieceBytes, cut after a space where there is one, else
  // before a UTF-8 lead byte.
  void push_cut(std::string_view line) {
    ++file_sentences_;
    while (line.size() > kPieceBytes) {
      size_t cut = line.rfind(' ', kPieceBytes - 1);
      if (cut == std::string_view::npos || cut == 0) {
        cut = kPieceBytes;
        while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
      }
      queue_.emplace_back(line.substr(0, cut));
      line.remove_prefix(cut);
      while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    }
    if (!line.empty()) queue_.emplace_back(line);
  }

  std::vector<std::string> files_;
  DocumentFormat format_;
  size_t file_index_ = 0;
  std::unique_ptr<ChunkReader> reader_;
  std::deque<std::string> queue_;
  std::string value_, error_;
  sentencepiece::util::Status status_;
  bool done_ = false;
  int64_t sentences_ = 0, file_sentences_ = 0;
};

}  // namespace

int64_t train_sentencepiece(const std::vector<std::string>& files, const std::string& document_format,
                         const fs::path& model_file, int64_t vocab_size, bool lowercase) {
  CorpusSentences sentences(files, parse_document_format(document_format));
  fs::create_directories(model_file.parent_path().empty() ? fs::path(".") : model_file.parent_path());
  const fs::path tmp_prefix = model_file.string() + ".training";
  // No input files: the sentences come from the iterator, so file names may hold commas or
  // spaces. A map rather than a command line, which the trainer would echo to stderr.
  const std::unordered_map<std::string, std::string> args = {
      {"model_prefix", tmp_prefix.string()},
      {"vocab_size", std::to_string(vocab_size)},
      {"model_type", "unigram"},
      {"character_coverage", "0.9999"},
      {"hard_vocab_limit", "false"},
      {"pad_id", "0"}, {"unk_id", "1"}, {"bos_id", "-1"}, {"eos_id", "-1"},
      {"control_symbols", "[CLS],[SEP],[MASK]"},
      {"pad_piece", "[PAD]"},
      {"input_sentence_size", std::to_string(CorpusSentences::kSampleSentences)},
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", "4096"},  // above every piece: none is dropped
      {"num_threads", "1"},
      {"minloglevel", "2"},
      {"normalization_rule_name", lowercase ? "nmt_nfkc_cf" : "nmt_nfkc"}};
  log::info("data", "training sentencepiece (vocab {}) on {} file(s)", vocab_size, files.size());
  // A fixed seed: the sentence sample of a large corpus, hence the vocabulary, is the same in
  // every run of the same data, whatever the method (the comparison's tokenizer is one).
  sentencepiece::SetRandomGeneratorSeed(kTrainingSeed);
  // The trainer's own files (<model>.training.model/.vocab) go, whatever happens next.
  struct Cleanup {
    const fs::path& prefix;
    ~Cleanup() {
      std::error_code ignored;
      for (const char* ext : {".model", ".vocab"}) fs::remove(prefix.string() + ext, ignored);
    }
  } cleanup{tmp_prefix};
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &sentences);
  if (!sentences.error().empty()) throw UserError(sentences.error());
  if (!status.ok()) throw UserError("sentencepiece training failed: " + status.ToString());
  write_atomic_with(model_file, [&](const fs::path& tmp) { fs::rename(tmp_prefix.string() + ".model", tmp); });
  // hard_vocab_limit false: a small corpus yields fewer pieces than asked rather than an error.
  const int64_t pieces = SentencePieceTokenizer(model_file).vocab_size();
  log::info("data", "sentencepiece trained on {} sentences: {} pieces{}", sentences.sentences(), pieces,
            pieces < vocab_size ? fmt::format(" (of the {} asked: the corpus has no more)", vocab_size) : std::string());
  std::error_code ec;
  fs::rename(tmp_prefix.string() + ".vocab", model_file.string().substr(0, model_file.string().size() - 6) + ".vocab",
             ec);
  return sentences.sentences();
}

}  // namespace rpe
