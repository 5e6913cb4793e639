// SQuAD v1.1/v2.0 data: the official JSON reader and the windowed features of the
// reference BERT implementation (Devlin et al. 2019, run_squad.py):
//   [CLS] question[:max_query_len] [SEP] context[w : w + M] [SEP],  M = max_seq_len - |q| - 3,
//   windows start every doc_stride tokens until the context is covered. Answer spans are
// mapped from character offsets to context tokens through the tokenizer's byte offsets; a
// window that does not contain the whole answer (or an unanswerable question) targets
// [CLS] (position 0).
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "eval/squad_metrics.h"

namespace rpe::finetune {

struct SquadAnswer {
  std::string text;
  int64_t begin = 0, end = 0;  // [begin, end) bytes in the context
};

struct SquadExample {
  std::string id, question, context;  // UTF-8
  std::vector<SquadAnswer> answers;   // empty when unanswerable
  bool impossible = false;
};

// Reads an official SQuAD JSON file. Malformed JSON, a missing or mistyped field, an id that
// an earlier question has (predictions are keyed by id), or an answer whose answer_start does
// not point at its text in the context is a UserError naming the file and the record
// (data[i].paragraphs[j].qas[k], id). With answers_optional (questions to predict, not to train
// or score on), a question may have no "answers" at all, and "answers": [] without is_impossible
// only in a file where no question has answers or is_impossible (an unlabelled file; in a
// labelled one it is refused, as evaluate-squad refuses it).
std::vector<SquadExample> read_squad(const std::filesystem::path& file, bool answers_optional = false);

// SQuAD 2.0's unanswerable questions under the 1.1 protocol would be trained to [CLS], scored 0
// and filed as SQuAD 1.1: a UserError naming `file` and the first such question.
// `remedy`: what the message advises ("" = fine-tuning's: finetune.squad_v2 or 1.1 files).
void refuse_unanswerable(const std::string& file, const std::vector<SquadExample>& examples,
                         const std::string& remedy = "");

// Gold answers for the metrics.
std::vector<eval::SquadGold> squad_gold(const std::vector<SquadExample>& examples);

struct SquadFeatureOptions {
  int64_t max_seq_len = 384, doc_stride = 128, max_query_len = 64;
};

struct SquadFeature {
  int64_t example = 0;                 // index into the examples
  std::vector<int64_t> ids;            // [L] token ids
  int64_t context_offset = 0;          // sequence position of the first context token
  int64_t doc_start = 0;               // index of that token among the context's tokens
  int64_t doc_len = 0;                 // context tokens in this window
  std::vector<uint8_t> max_context;    // [doc_len] 1 where this window is the token's best
  int64_t start = 0, end = 0;          // target positions in the sequence (0 = [CLS])
};

// All windows of all examples, in example order; `offsets` (null for training data, which
// never turns spans back into text) receives each example's context token byte offsets.
std::vector<SquadFeature> make_squad_features(const std::vector<SquadExample>& examples, const Tokenizer& tok,
                                              const SquadFeatureOptions& o,
                                              std::vector<std::vector<std::pair<int32_t, int32_t>>>* offsets);

}  // namespace rpe::finetune
