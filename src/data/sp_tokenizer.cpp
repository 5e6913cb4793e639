// SentencePiece wrapper: training, loading, encoding with word starts and byte offsets.
#include "data/sp_tokenizer.h"

#include <sentencepiece_trainer.h>

#include <fstream>

#include "data/corpus.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;

SentencePieceTokenizer::SentencePieceTokenizer(const fs::path& model_file) {
  if (!fs::exists(model_file)) throw UserError(model_file.string() + ": sentencepiece model not found");
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

void train_sentencepiece(const std::vector<std::string>& files, const fs::path& model_file, int64_t vocab_size,
                         bool lowercase) {
  // Validate inputs first so errors name the file rather than coming from the trainer.
  for (const auto& f : files) read_documents(f);
  fs::create_directories(model_file.parent_path().empty() ? fs::path(".") : model_file.parent_path());
  std::string inputs;
  for (const auto& f : files) inputs += (inputs.empty() ? "" : ",") + f;
  const fs::path tmp_prefix = model_file.string() + ".training";
  const std::string args = "--input=" + inputs + " --model_prefix=" + tmp_prefix.string() +
                           " --vocab_size=" + std::to_string(vocab_size) +
                           " --model_type=unigram --character_coverage=0.9999 --hard_vocab_limit=false"
                           " --pad_id=0 --unk_id=1 --bos_id=-1 --eos_id=-1"
                           " --control_symbols=[CLS],[SEP],[MASK] --pad_piece=[PAD]"
                           " --input_sentence_size=2000000 --shuffle_input_sentence=true"
                           " --num_threads=1 --minloglevel=2 --normalization_rule_name=" +
                           std::string(lowercase ? "nmt_nfkc_cf" : "nmt_nfkc");
  log::info("data", "training sentencepiece (vocab {}) on {} file(s)", vocab_size, files.size());
  const auto status = sentencepiece::SentencePieceTrainer::Train(args);
  if (!status.ok()) throw UserError("sentencepiece training failed: " + status.ToString());
  write_atomic_with(model_file, [&](const fs::path& tmp) { fs::rename(tmp_prefix.string() + ".model", tmp); });
  std::error_code ec;
  fs::rename(tmp_prefix.string() + ".vocab", model_file.string().substr(0, model_file.string().size() - 6) + ".vocab",
             ec);
}

}  // namespace rpe
