// Chooses and builds the configured tokenizer.
#include "data/sp_tokenizer.h"
#include "data/wordpiece_tokenizer.h"
#include "util/errors.h"

namespace rpe {
namespace fs = std::filesystem;

std::unique_ptr<Tokenizer> make_tokenizer(const DataOptions& o, const fs::path& default_model_path) {
  if (o.tokenizer == "sentencepiece") {
    fs::path model = o.tokenizer_model.empty() ? default_model_path : fs::path(o.tokenizer_model);
    if (o.tokenizer_model.empty() && !fs::exists(model))
      train_sentencepiece(o.train_files, model, o.tokenizer_vocab_size, o.lowercase);
    return std::make_unique<SentencePieceTokenizer>(model);
  }
  if (o.tokenizer == "wordpiece") {
    if (o.tokenizer_model.empty())
      throw UserError("data.tokenizer_model: wordpiece needs the path of a BERT vocab.txt");
    return std::make_unique<WordPieceTokenizer>(o.tokenizer_model, o.lowercase);
  }
  throw UserError("data.tokenizer: '" + o.tokenizer + "' is not available (valid: sentencepiece, wordpiece)");
}

}  // namespace rpe
