// SQuAD v1.1/v2.0 metrics (see squad_metrics.h). Strings are UTF-8; the normaliser walks
// code points so lower-casing, word boundaries and whitespace follow Python 3's str rules,
// which the official scripts rely on.
#include "eval/squad_metrics.h"

#include <utf8proc.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <unordered_map>

namespace rpe::eval {
namespace {

std::vector<int32_t> decode(const std::string& s) {
  std::vector<int32_t> out;
  const auto* p = reinterpret_cast<const utf8proc_uint8_t*>(s.data());
  utf8proc_ssize_t i = 0, n = static_cast<utf8proc_ssize_t>(s.size());
  while (i < n) {
    utf8proc_int32_t cp = 0;
    const auto len = utf8proc_iterate(p + i, n - i, &cp);
    if (len <= 0) {  // invalid byte: keep it as U+FFFD, one byte on
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::string encode(const std::vector<int32_t>& cps) {
  std::string out;
  utf8proc_uint8_t buf[4];
  for (auto cp : cps) out.append(reinterpret_cast<char*>(buf), utf8proc_encode_char(cp, buf));
  return out;
}

// Python's str.isspace(): bidi classes WS, B, S or category Zs.
bool is_space(int32_t c) {
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0) return true;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
      c == 0x3000)
    return true;
  return false;
}

// Python's re \w for str patterns: str.isalnum() (letters, and Nd/Nl/No numbers) or '_'.
bool is_word(int32_t c) {
  if (c == '_') return true;
  if (c < 0x80) return std::isalnum(c) != 0;
  switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

// string.punctuation: the 32 ASCII punctuation characters only.
bool is_ascii_punct(int32_t c) { return c < 0x80 && std::strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", c) && c != 0; }

// Unicode "cased" (has case) and "case-ignorable" (Mn, Me, Cf, Lm, Sk and the word-internal
// apostrophes/dots/colons), as Python's str.lower() uses them for the final-sigma rule.
bool is_cased(int32_t c) {
  const auto cat = utf8proc_category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT ||
         utf8proc_tolower(c) != c || utf8proc_toupper(c) != c;
}
bool is_case_ignorable(int32_t c) {
  switch (utf8proc_category(c)) {
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_SK:
      return true;
    default:
      break;
  }
  static const int32_t mid[] = {0x27, 0x2E, 0x3A, 0xB7, 0x387, 0x5F4, 0x2018, 0x2019, 0x2024, 0x2027,
                                0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};
  return std::find(std::begin(mid), std::end(mid), c) != std::end(mid);
}

// Capital sigma lower-cases to final sigma (U+03C2) after a cased letter and not before one
// (case-ignorable characters skipped on both sides), else to U+03C3 -- Python's rule.
int32_t lower_sigma(const std::vector<int32_t>& s, size_t i) {
  size_t j = i;
  while (j > 0 && is_case_ignorable(s[j - 1])) --j;
  if (j == 0 || !is_cased(s[j - 1])) return 0x3C3;
  size_t k = i + 1;
  while (k < s.size() && is_case_ignorable(s[k])) ++k;
  return (k == s.size() || !is_cased(s[k])) ? 0x3C2 : 0x3C3;
}

std::vector<int32_t> to_lower(const std::vector<int32_t>& in) {
  std::vector<int32_t> out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const int32_t c = in[i];
    if (c == 0x3A3) {
      out.push_back(lower_sigma(in, i));
    } else if (c == 0x130) {  // the one full (multi-code-point) lower-case mapping: İ -> i + U+0307
      out.push_back('i');
      out.push_back(0x307);
    } else {
      out.push_back(utf8proc_tolower(c));
    }
  }
  return out;
}

}  // namespace

std::string normalize_answer(const std::string& s) {
  // lower -> remove punctuation -> remove articles -> fix whitespace (the script's order).
  std::vector<int32_t> t;
  for (auto c : to_lower(decode(s)))
    if (!is_ascii_punct(c)) t.push_back(c);
  // \b(a|an|the)\b -> ' ': a maximal run of word characters equal to an article.
  std::vector<int32_t> u;
  for (size_t i = 0; i < t.size();) {
    if (!is_word(t[i])) {
      u.push_back(t[i++]);
      continue;
    }
    size_t j = i;
    while (j < t.size() && is_word(t[j])) ++j;
    const std::vector<int32_t> run(t.begin() + i, t.begin() + j);
    const bool article = run == std::vector<int32_t>{'a'} || run == std::vector<int32_t>{'a', 'n'} ||
                         run == std::vector<int32_t>{'t', 'h', 'e'};
    if (article) u.push_back(' ');
    else u.insert(u.end(), run.begin(), run.end());
    i = j;
  }
  // ' '.join(text.split())
  std::vector<int32_t> out;
  bool pending = false;
  for (auto c : u) {
    if (is_space(c)) {
      pending = !out.empty();
      continue;
    }
    if (pending) out.push_back(' ');
    pending = false;
    out.push_back(c);
  }
  return encode(out);
}

std::vector<std::string> answer_tokens(const std::string& s) {
  std::vector<std::string> toks;
  const std::string n = normalize_answer(s);
  size_t i = 0;
  while (i < n.size()) {
    const size_t j = n.find(' ', i);
    toks.push_back(n.substr(i, j == std::string::npos ? std::string::npos : j - i));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return toks;
}

double exact_match(const std::string& prediction, const std::string& gold) {
  return normalize_answer(prediction) == normalize_answer(gold) ? 1.0 : 0.0;
}

namespace {
double token_f1(const std::vector<std::string>& p, const std::vector<std::string>& g) {
  std::unordered_map<std::string, int64_t> counts;
  for (const auto& t : g) ++counts[t];
  int64_t same = 0;
  for (const auto& t : p) {
    auto it = counts.find(t);
    if (it != counts.end() && it->second > 0) {
      --it->second;
      ++same;
    }
  }
  if (same == 0) return 0.0;
  const double precision = static_cast<double>(same) / static_cast<double>(p.size());
  const double recall = static_cast<double>(same) / static_cast<double>(g.size());
  return 2.0 * precision * recall / (precision + recall);
}
}  // namespace

double f1_v1(const std::string& prediction, const std::string& gold) {
  return token_f1(answer_tokens(prediction), answer_tokens(gold));
}

double f1_v2(const std::string& prediction, const std::string& gold) {
  const auto p = answer_tokens(prediction), g = answer_tokens(gold);
  if (p.empty() || g.empty()) return p == g ? 1.0 : 0.0;
  return token_f1(p, g);
}

SquadScores evaluate_squad_v1(const std::vector<SquadGold>& gold, const std::map<std::string, std::string>& preds) {
  SquadScores s;
  double em = 0, f1 = 0;
  for (const auto& q : gold) {
    ++s.total;
    auto it = preds.find(q.id);
    if (it == preds.end()) continue;  // missing prediction: scores 0
    double best_em = 0, best_f1 = 0;
    for (const auto& a : q.answers) {
      best_em = std::max(best_em, exact_match(it->second, a));
      best_f1 = std::max(best_f1, f1_v1(it->second, a));
    }
    em += best_em;
    f1 += best_f1;
  }
  const double n = static_cast<double>(std::max<int64_t>(1, s.total));
  s.exact = 100.0 * em / n;
  s.f1 = 100.0 * f1 / n;
  return s;
}

SquadScores evaluate_squad_v2(const std::vector<SquadGold>& gold, const std::map<std::string, std::string>& preds,
                              const NaScores& na_list, double na_prob_thresh) {
  const std::map<std::string, double> na_probs(na_list.begin(), na_list.end());
  SquadScores s;
  std::map<std::string, double> em_raw, f1_raw;
  std::map<std::string, bool> has_ans;
  double em_has = 0, f1_has = 0, em_no = 0, f1_no = 0;
  for (const auto& q : gold) {
    // HasAns is "the record lists an answer" (the official script's bool(answers)), even one
    // that normalises to nothing; only the scoring drops such golds.
    const bool answerable = !q.answers.empty();
    has_ans[q.id] = answerable;
    std::vector<std::string> answers;
    for (const auto& a : q.answers)
      if (!normalize_answer(a).empty()) answers.push_back(a);
    if (answers.empty()) answers = {""};
    double best_em = 0, best_f1 = 0;
    auto it = preds.find(q.id);
    if (it != preds.end()) {
      for (const auto& a : answers) {
        best_em = std::max(best_em, exact_match(it->second, a));
        best_f1 = std::max(best_f1, f1_v2(it->second, a));
      }
    }
    em_raw[q.id] = best_em;
    f1_raw[q.id] = best_f1;
    // With no-answer scores, a question scored above na_prob_thresh counts as answered with ""
    // in exact/f1 (the official --na-prob-thresh); the best-threshold search reads raw scores.
    if (const auto na = na_probs.find(q.id); na != na_probs.end() && na->second > na_prob_thresh)
      best_em = best_f1 = answerable ? 0.0 : 1.0;
    (answerable ? em_has : em_no) += best_em;
    (answerable ? f1_has : f1_no) += best_f1;
    ++(answerable ? s.has_ans_total : s.no_ans_total);
  }
  s.total = s.has_ans_total + s.no_ans_total;
  auto pct = [](double x, int64_t n) { return n > 0 ? 100.0 * x / static_cast<double>(n) : 0.0; };
  s.exact = pct(em_has + em_no, s.total);
  s.f1 = pct(f1_has + f1_no, s.total);
  s.has_ans_exact = pct(em_has, s.has_ans_total);
  s.has_ans_f1 = pct(f1_has, s.has_ans_total);
  s.no_ans_exact = pct(em_no, s.no_ans_total);
  s.no_ans_f1 = pct(f1_no, s.no_ans_total);
  if (na_probs.empty()) return s;

  // find_best_thresh: start from "every question null", then answer questions in order of
  // increasing no-answer score, equal ones in the file's order; keep the best running total and
  // the score where it peaked. A scored id the dev set lacks is passed over; a question without a
  // score is never answered (it stays null), as in the script.
  std::vector<std::pair<double, std::string>> order;
  for (const auto& [id, prob] : na_list)
    if (has_ans.count(id)) order.emplace_back(prob, id);
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  auto best = [&](const std::map<std::string, double>& raw, double& best_score, double& best_thresh) {
    double cur = static_cast<double>(s.no_ans_total), top = cur, thresh = 0.0;
    for (const auto& [prob, id] : order) {
      double diff;
      if (has_ans[id]) diff = raw.at(id);
      else {
        auto it = preds.find(id);
        diff = (it != preds.end() && !it->second.empty()) ? -1.0 : 0.0;
      }
      cur += diff;
      if (cur > top) {
        top = cur;
        thresh = prob;
      }
    }
    best_score = pct(top, s.total);
    best_thresh = thresh;
  };
  best(em_raw, s.best_exact, s.best_exact_thresh);
  best(f1_raw, s.best_f1, s.best_f1_thresh);
  s.has_thresh = true;
  return s;
}

}  // namespace rpe::eval
