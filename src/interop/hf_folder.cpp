// vocab.txt / tokenizer_config.json of an exported Hugging Face folder, and the folder's
// all-or-nothing write (see hf_folder.h).
#include "interop/hf_folder.h"

#include <array>
#include <optional>

#include "data/sp_tokenizer.h"
#include "data/wordpiece_tokenizer.h"
#include "interop/safetensors.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/file_tree.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// BERT's special tokens in SpecialIds order, and the tokenizer_config.json key naming each.
constexpr std::array<const char*, 5> kSpecialNames = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
constexpr std::array<const char*, 5> kSpecialKeys = {"pad_token", "unk_token", "cls_token", "sep_token", "mask_token"};
using Roles = std::array<int64_t, 5>;  // the id of each special token, -1 where there is none

// The special tokens' ids in a wordpiece vocabulary: each name's last line, as WordPieceTokenizer
// (and BERT's) reading keeps the last of repeated lines.
Roles wordpiece_roles(const std::vector<std::string>& pieces) {
  Roles roles;
  roles.fill(-1);
  for (size_t id = 0; id < pieces.size(); ++id)
    for (size_t k = 0; k < kSpecialNames.size(); ++k)
      if (pieces[id] == kSpecialNames[k]) roles[k] = static_cast<int64_t>(id);
  return roles;
}

Roles sentencepiece_roles(const SpecialIds& s) { return {s.pad, s.unk, s.cls, s.sep, s.mask}; }

HfVocab make_vocab(std::string text, const std::vector<std::string>& pieces, const Roles& roles) {
  HfVocab v{std::move(text), json::object()};
  for (size_t k = 0; k < roles.size(); ++k)
    if (roles[k] >= 0 && roles[k] < static_cast<int64_t>(pieces.size())) v.special_tokens[kSpecialKeys[k]] = pieces[roles[k]];
  return v;
}

void check_size(const std::vector<std::string>& pieces, const ModelOptions& m, const fs::path& file) {
  if (pieces.empty()) throw UserError(file.string() + ": empty (a vocabulary has a piece per line)");
  if (static_cast<int64_t>(pieces.size()) > m.vocab_size)
    throw UserError(file.string() + ": " + std::to_string(pieces.size()) + " lines but the model's vocab_size is " +
                    std::to_string(m.vocab_size) + " (its tokenizer would produce ids the model has no embedding for)");
}

fs::path find_file(const std::vector<fs::path>& candidates) {
  std::error_code ec;
  for (const auto& c : candidates)
    if (!c.empty() && fs::is_regular_file(c, ec)) return c;
  return {};
}

// The model's own tokenizer file: the config's wordpiece vocab.txt (as named, or beside the
// checkpoint), or its SentencePiece model (as named, or the run's tokenizer.model); empty when
// neither is found.
fs::path own_tokenizer(const Config& cfg, const fs::path& checkpoint) {
  const fs::path named = cfg.data.tokenizer_model;
  if (cfg.data.tokenizer == "wordpiece")
    return find_file({named, named.empty() ? fs::path() : checkpoint.parent_path() / named.filename()});
  return find_file({named, checkpoint.parent_path().parent_path() / "tokenizer.model"});  // <run>/checkpoints/x.pt
}

// --vocab FILE: fits the model, and its special tokens sit at the ids the model was trained with.
HfVocab given_vocab(const Config& cfg, const fs::path& own, const fs::path& vocab) {
  std::string text = read_file(vocab);
  const auto pieces = vocab_lines(text);
  check_size(pieces, cfg.model, vocab);
  std::optional<Roles> trained;
  if (cfg.data.tokenizer != "wordpiece")  // rpe-train's SentencePiece models: [PAD] <unk> [CLS] [SEP] [MASK] = 0-4
    trained = own.empty() ? sentencepiece_roles(SpecialIds{}) : sentencepiece_roles(SentencePieceTokenizer(own).special());
  else if (!own.empty())
    trained = wordpiece_roles(vocab_lines(read_file(own)));
  else
    log::warn("export", "{}: the model's own vocabulary '{}' was not found, so the special tokens' ids cannot be "
              "checked against it", vocab.string(), cfg.data.tokenizer_model);
  const Roles roles = wordpiece_roles(pieces);
  for (size_t k = 0; trained && k < roles.size(); ++k) {
    const int64_t want = (*trained)[k];
    if (want < 0 || roles[k] == want) continue;  // a token the model never had cannot be misplaced
    throw UserError(vocab.string() + ": " +
                    (roles[k] < 0 ? std::string("has no ") + kSpecialNames[k] + " line"
                                  : std::string(kSpecialNames[k]) + " is at id " + std::to_string(roles[k])) +
                    ", but the model was trained with it at id " + std::to_string(want) +
                    " (not the model's vocabulary)");
  }
  return make_vocab(std::move(text), pieces, roles);
}

}  // namespace

HfVocab hf_vocab(const Config& cfg, const fs::path& checkpoint, const fs::path& vocab) {
  const fs::path own = own_tokenizer(cfg, checkpoint);
  if (!vocab.empty()) return given_vocab(cfg, own, vocab);
  const std::string named = cfg.data.tokenizer_model;
  if (own.empty() && cfg.data.tokenizer == "wordpiece")
    throw UserError(checkpoint.string() + ": the wordpiece vocabulary '" + named + "' was not found (pass --vocab FILE)");
  if (own.empty())
    throw UserError(checkpoint.string() + ": the " + cfg.data.tokenizer + " model '" + named +
                    "' was not found (pass --vocab FILE, a vocab.txt whose line i is token id i)");
  if (cfg.data.tokenizer == "wordpiece") {
    std::string text = read_file(own);
    const auto pieces = vocab_lines(text);
    check_size(pieces, cfg.model, own);
    return make_vocab(std::move(text), pieces, wordpiece_roles(pieces));
  }
  log::warn("export", "{} is a SentencePiece model: vocab.txt lists its pieces in id order, but BertTokenizer "
                      "will not segment text the same way", own.string());
  SentencePieceTokenizer tok(own);
  std::vector<std::string> pieces;
  std::string text;
  for (int32_t id = 0; id < tok.vocab_size(); ++id) {
    pieces.push_back(tok.piece(id));
    text += pieces.back() + "\n";
  }
  check_size(pieces, cfg.model, own);
  return make_vocab(std::move(text), pieces, sentencepiece_roles(tok.special()));
}

void write_hf_folder(const fs::path& out_dir, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                     const json& config, const HfVocab& vocab, const Config& cfg) {
  json tok{{"do_lower_case", cfg.data.lowercase}, {"tokenizer_class", "BertTokenizer"},
           {"model_max_length", cfg.model.max_position}};
  tok.update(vocab.special_tokens);  // transformers' defaults ([UNK], ...) would name pieces a SentencePiece vocab lacks
  const fs::path stage = make_staging_folder(out_dir);
  try {
    write_safetensors(stage / "model.safetensors", tensors, {{"format", "pt"}});
    write_file_atomic(stage / "config.json", config.dump(2) + "\n");
    write_file_atomic(stage / "vocab.txt", vocab.text);
    write_file_atomic(stage / "tokenizer_config.json", tok.dump(2) + "\n");
    replace_folder(stage, folder_path(out_dir));
  } catch (...) {  // a full disk, say: the half-written stage goes, the old folder stays as it was
    try {
      remove_tree(stage);
    } catch (const UserError& e) {
      log::warn("export", "{}", e.what());
    }
    throw;
  }
}

}  // namespace rpe
