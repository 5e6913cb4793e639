// Chooses and builds the configured tokenizer; its fingerprint.
#include "data/sp_tokenizer.h"
#include "data/wordpiece_tokenizer.h"
#include "util/atomic_writer.h"
#include "util/errors.h"

namespace rpe {
namespace fs = std::filesystem;

std::unique_ptr<Tokenizer> make_tokenizer(const DataOptions& o, const fs::path& default_model_path) {
  if (o.tokenizer == "sentencepiece") {
    fs::path model = o.tokenizer_model.empty() ? default_model_path : fs::path(o.tokenizer_model);
    if (o.tokenizer_model.empty() && !fs::exists(model) && o.train_files.empty())
      throw UserError("data.tokenizer_model: empty, and no data.train_files to train a sentencepiece model on: name "
                      "a tokenizer");
    if (o.tokenizer_model.empty() && !fs::exists(model))
      train_sentencepiece(o.train_files, o.document_format, model, o.tokenizer_vocab_size, o.lowercase);
    return std::make_unique<SentencePieceTokenizer>(model);
  }
  if (o.tokenizer == "wordpiece") {
    if (o.tokenizer_model.empty())
      throw UserError("data.tokenizer_model: wordpiece needs the path of a BERT vocab.txt");
    return std::make_unique<WordPieceTokenizer>(o.tokenizer_model, o.lowercase);
  }
  throw UserError("data.tokenizer: '" + o.tokenizer + "' is not available (valid: sentencepiece, wordpiece)");
}

uint32_t tokenizer_crc32(const Tokenizer& t) {
  uint32_t crc = 0;
  for (int32_t id = 0; id < static_cast<int32_t>(t.vocab_size()); ++id) {
    const std::string p = t.piece(id) + '\0';  // the terminator keeps "ab","c" apart from "a","bc"
    crc = crc32_update(crc, p.data(), p.size());
  }
  const auto& s = t.special();
  const int32_t special[] = {s.pad, s.unk, s.cls, s.sep, s.mask, t.first_regular_id()};
  return crc32_update(crc, special, sizeof special);
}

}  // namespace rpe
