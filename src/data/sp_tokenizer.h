// SentencePiece tokenizer (Kudo & Richardson 2018) through the library's own trainer and
// processor. Reserved ids: 0 [PAD], 1 <unk>, 2 [CLS], 3 [SEP], 4 [MASK]; word starts are
// pieces that begin with U+2581.
#pragma once
#include <sentencepiece_processor.h>

#include "data/tokenizer.h"

namespace rpe {

class SentencePieceTokenizer : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::filesystem::path& model_file);
  Encoding encode(std::string_view text) const override;
  int64_t vocab_size() const override { return processor_.GetPieceSize(); }
  std::string piece(int32_t id) const override { return processor_.IdToPiece(id); }
  int32_t first_regular_id() const override { return 5; }
  std::string kind() const override { return "sentencepiece"; }

 private:
  sentencepiece::SentencePieceProcessor processor_;
};

// Trains a unigram model on the sentences of `files` (.gz too; documents per
// `document_format`, data.document_format) and writes `model_file` atomically. Streams the
// files; the same files give the same model (a fixed sampling seed). UserError naming the
// file for a missing, empty or non-UTF-8 file. Returns how many sentences it read (a line longer
// than 256 bytes counts as its pieces: the trainer's sample is 2 M of them at most).
int64_t train_sentencepiece(const std::vector<std::string>& files, const std::string& document_format,
                         const std::filesystem::path& model_file, int64_t vocab_size, bool lowercase);

}  // namespace rpe
