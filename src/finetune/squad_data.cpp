// SQuAD reader and feature windows (see squad_data.h).
#include "finetune/squad_data.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <unordered_set>

#include "util/errors.h"
#include "util/json_text.h"

namespace rpe::finetune {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Byte index of every code point of a UTF-8 string, plus the end: [chars + 1].
std::vector<int64_t> char_to_byte(const std::string& s) {
  std::vector<int64_t> out;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) out.push_back(static_cast<int64_t>(i));
  out.push_back(static_cast<int64_t>(s.size()));
  return out;
}

const json& field(const json& obj, const char* key, json::value_t type, const std::string& where) {
  if (!obj.is_object()) throw UserError(where + ": expected a JSON object");
  auto it = obj.find(key);
  if (it == obj.end()) throw UserError(where + ": missing field '" + key + "'");
  const bool ok = it->type() == type || (type == json::value_t::number_integer && it->is_number_integer());
  if (!ok) throw UserError(where + ": field '" + key + "' has the wrong type (" + it->type_name() + ")");
  return *it;
}

}  // namespace

std::vector<SquadExample> read_squad(const fs::path& file, bool answers_optional) {
  const json doc = read_json_file(file);
  const std::string f = file.string();
  const auto& data = field(doc, "data", json::value_t::array, f);
  std::vector<SquadExample> out;
  std::unordered_set<std::string> ids;
  bool labelled = false;    // some question has answers or is_impossible: the file will be scored
  std::string unanswered;  // the first question with "answers": [] and not is_impossible
  for (size_t i = 0; i < data.size(); ++i) {
    const std::string wa = f + ": data[" + std::to_string(i) + "]";
    const auto& paragraphs = field(data[i], "paragraphs", json::value_t::array, wa);
    for (size_t j = 0; j < paragraphs.size(); ++j) {
      const std::string wp = wa + ".paragraphs[" + std::to_string(j) + "]";
      const std::string context = field(paragraphs[j], "context", json::value_t::string, wp).get<std::string>();
      const auto c2b = char_to_byte(context);
      const auto& qas = field(paragraphs[j], "qas", json::value_t::array, wp);
      for (size_t k = 0; k < qas.size(); ++k) {
        std::string wq = wp + ".qas[" + std::to_string(k) + "]";
        SquadExample ex;
        ex.id = field(qas[k], "id", json::value_t::string, wq).get<std::string>();
        wq += " (id " + ex.id + ")";
        if (!ids.insert(ex.id).second)
          throw UserError(wq + ": an earlier question has the same id (predictions and scores are keyed by id)");
        ex.question = field(qas[k], "question", json::value_t::string, wq).get<std::string>();
        ex.context = context;
        if (qas[k].contains("is_impossible")) {
          if (!qas[k]["is_impossible"].is_boolean()) throw UserError(wq + ": field 'is_impossible' is not a boolean");
          ex.impossible = qas[k]["is_impossible"].get<bool>();
        }
        if (answers_optional && !qas[k].contains("answers")) {
          out.push_back(std::move(ex));
          continue;
        }
        const auto& answers = field(qas[k], "answers", json::value_t::array, wq);
        for (size_t a = 0; a < answers.size(); ++a) {
          const std::string wn = wq + ".answers[" + std::to_string(a) + "]";
          SquadAnswer ans;
          ans.text = field(answers[a], "text", json::value_t::string, wn).get<std::string>();
          // An empty span would train as "no answer" ([CLS]) and score as one: SQuAD spells an
          // unanswerable question with is_impossible and no answers, never with an empty text.
          if (ans.text.find_first_not_of(" \t\r\n") == std::string::npos)
            throw UserError(wn + ": answer text is empty (an unanswerable question has \"answers\": [] and, in SQuAD "
                                 "2.0, \"is_impossible\": true)");
          const auto& at = field(answers[a], "answer_start", json::value_t::number_integer, wn);
          // Compared without adding (start + chars overflows for a start near 2^63); an unsigned
          // value past int64's range is outside any context too.
          const bool fits = !at.is_number_unsigned() || at.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX);
          const int64_t start = fits ? at.get<int64_t>() : -1;
          const int64_t chars = static_cast<int64_t>(char_to_byte(ans.text).size()) - 1;
          const int64_t context_chars = static_cast<int64_t>(c2b.size()) - 1;
          if (start < 0 || start > context_chars || chars > context_chars - start)
            throw UserError(wn + ": answer_start " + at.dump() + " lies outside the context");
          ans.begin = c2b[start];
          ans.end = c2b[start + chars];
          if (context.compare(ans.begin, ans.end - ans.begin, ans.text) != 0)
            throw UserError(wn + ": answer_start " + std::to_string(start) + " does not match the context ('" +
                            excerpt(context.substr(ans.begin, ans.end - ans.begin)) + "' != '" + excerpt(ans.text) + "')");
          ex.answers.push_back(std::move(ans));
        }
        if (!ex.impossible && ex.answers.empty()) {
          if (!answers_optional) throw UserError(wq + ": no answers and not is_impossible");
          if (unanswered.empty()) unanswered = wq;
        }
        labelled = labelled || ex.impossible || !ex.answers.empty();
        if (ex.impossible) ex.answers.clear();
        out.push_back(std::move(ex));
      }
    }
  }
  if (out.empty()) throw UserError(f + ": no questions found");
  // A scored file holds evaluate-squad's rule: an empty answers list asserts "no answer", which
  // SQuAD 1.1 cannot score and 2.0 spells with is_impossible. A file without any answers is
  // unlabelled (predictions only), whatever its questions carry.
  if (labelled && !unanswered.empty())
    throw UserError(unanswered + ": no answers and not is_impossible (other questions have answers, so the file is "
                                 "scored; leave out \"answers\" for a question to predict only)");
  return out;
}

void refuse_unanswerable(const std::string& file, const std::vector<SquadExample>& examples, const std::string& remedy) {
  for (const auto& ex : examples)
    if (ex.impossible)
      throw UserError(file + ": question " + ex.id + " is unanswerable (is_impossible), a SQuAD 2.0 file: " +
                      (remedy.empty() ? "set finetune.squad_v2: true (configs/finetune/squad_v2.yaml) or use SQuAD 1.1 "
                                        "files"
                                      : remedy));
}

std::vector<eval::SquadGold> squad_gold(const std::vector<SquadExample>& examples) {
  std::vector<eval::SquadGold> gold;
  for (const auto& ex : examples) {
    eval::SquadGold g{ex.id, {}};
    for (const auto& a : ex.answers) g.answers.push_back(a.text);
    gold.push_back(std::move(g));
  }
  return gold;
}

std::vector<SquadFeature> make_squad_features(const std::vector<SquadExample>& examples, const Tokenizer& tok,
                                              const SquadFeatureOptions& o,
                                              std::vector<std::vector<std::pair<int32_t, int32_t>>>* offsets) {
  const auto& sp = tok.special();
  std::vector<SquadFeature> features;
  if (offsets) offsets->assign(examples.size(), {});
  // Contexts repeat across questions; tokenize each distinct context once.
  std::string last_context;
  Encoding ctx;
  for (size_t e = 0; e < examples.size(); ++e) {
    const auto& ex = examples[e];
    if (e == 0 || ex.context != last_context) {
      ctx = tok.encode(ex.context);
      last_context = ex.context;
    }
    if (offsets) (*offsets)[e] = ctx.offsets;
    auto q = tok.encode(ex.question).ids;
    if (static_cast<int64_t>(q.size()) > o.max_query_len) q.resize(o.max_query_len);
    const int64_t n = static_cast<int64_t>(ctx.ids.size());
    const int64_t max_doc = o.max_seq_len - static_cast<int64_t>(q.size()) - 3;

    // Answer tokens (training target): first token ending after the answer's begin, last
    // token starting before its end. Only the first gold answer is a training target.
    int64_t ans_s = -1, ans_e = -1;
    if (!ex.answers.empty()) {
      const auto& a = ex.answers.front();
      for (int64_t t = 0; t < n; ++t) {
        if (ans_s < 0 && ctx.offsets[t].second > a.begin) ans_s = t;
        if (ctx.offsets[t].first < a.end) ans_e = t;
      }
      if (ans_s < 0 || ans_e < ans_s) ans_s = ans_e = -1;  // answer falls between tokens
    }

    // Window starts.
    std::vector<std::pair<int64_t, int64_t>> spans;  // (start, length)
    for (int64_t start = 0;;) {
      const int64_t len = std::min(max_doc, n - start);
      spans.emplace_back(start, len);
      if (start + len >= n) break;
      start += std::min(len, o.doc_stride);
    }
    for (size_t w = 0; w < spans.size(); ++w) {
      const auto [start, len] = spans[w];
      SquadFeature f;
      f.example = static_cast<int64_t>(e);
      f.ids.reserve(q.size() + len + 3);
      f.ids.push_back(sp.cls);
      f.ids.insert(f.ids.end(), q.begin(), q.end());
      f.ids.push_back(sp.sep);
      f.context_offset = static_cast<int64_t>(f.ids.size());
      f.ids.insert(f.ids.end(), ctx.ids.begin() + start, ctx.ids.begin() + start + len);
      f.ids.push_back(sp.sep);
      f.doc_start = start;
      f.doc_len = len;
      // A token's best window has the most context on its shorter side (+0.01 * length).
      f.max_context.resize(len);
      for (int64_t t = 0; t < len; ++t) {
        const int64_t pos = start + t;
        double best = -1;
        size_t best_w = 0;
        for (size_t v = 0; v < spans.size(); ++v) {
          const auto [s2, l2] = spans[v];
          if (pos < s2 || pos >= s2 + l2) continue;
          const double score = static_cast<double>(std::min(pos - s2, s2 + l2 - 1 - pos)) + 0.01 * static_cast<double>(l2);
          if (score > best) {
            best = score;
            best_w = v;
          }
        }
        f.max_context[t] = best_w == w;
      }
      if (ans_s >= 0 && ans_s >= start && ans_e < start + len) {
        f.start = f.context_offset + ans_s - start;
        f.end = f.context_offset + ans_e - start;
      }
      features.push_back(std::move(f));
    }
  }
  return features;
}

}  // namespace rpe::finetune
