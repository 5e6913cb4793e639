// SQuAD metrics against hand-computed cases. Expected normalisations were worked out from
// the published definition (lower, drop string.punctuation, \b(a|an|the)\b -> ' ',
// ' '.join(split())) with Python 3's Unicode rules for lower(), \w and whitespace.
#include <gtest/gtest.h>

#include "eval/squad_metrics.h"

using namespace rpe::eval;

TEST(SquadNormalize, OfficialEdgeCases) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"The Cat!", "cat"},
      {"  a  an the  ", ""},
      {"theater", "theater"},                  // articles only as whole words
      {"an-apple", "anapple"},                 // punctuation goes first, so no word boundary is left
      {"\xC3\x9Cn\xC3\xAF" "code THE", "\xC3\xBCn\xC3\xAF" "code"},  // Ünïcode THE -> ünïcode
      {"the_end", "theend"},                   // '_' is in string.punctuation
      {"1,000", "1000"},
      {"x\xC2\xA0y", "x y"},                   // no-break space is whitespace for split()
      {"\xC4\xB0stanbul", "i\xCC\x87stanbul"}, // İ lower-cases to i + combining dot (full mapping)
      {"\xE2\x80\x9Cquoted\xE2\x80\x9D the", "\xE2\x80\x9Cquoted\xE2\x80\x9D"},  // curly quotes are kept
      {"the\xE2\x80\x94war", "\xE2\x80\x94war"},  // em dash is not a word character: 'the' is removed
      {"Ana and the anas", "ana and anas"},
      {"A\tB\nthe\xE2\x80\x89" "C", "b c"},   // tab, newline, thin space
      {"x\xCC\x81" "a y", "x\xCC\x81 y"},      // a combining mark is not \w, so 'a' stands alone
      {"caf\xC3\xA9 the", "caf\xC3\xA9"},
      // Greek capital sigma: final form at a word end (Python's Final_Sigma rule), else medial.
      {"\xCE\x9A\xCE\xA4\xCE\x95\xCE\x8A\xCE\xA3 KTEIS", "\xCE\xBA\xCF\x84\xCE\xB5\xCE\xAF\xCF\x82 kteis"},
      {"\xCE\xA3\xCE\x91\xCE\xA3", "\xCF\x83\xCE\xB1\xCF\x82"},  // ΣΑΣ -> σας
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(normalize_answer(in), want) << "input: " << in;
}

TEST(SquadMetrics, ExactMatchAndF1HandComputed) {
  EXPECT_EQ(exact_match("The Eiffel tower.", "eiffel Tower"), 1.0);
  EXPECT_EQ(exact_match("Eiffel", "eiffel tower"), 0.0);
  // pred tokens [cat sat on mat], gold [cat on mat]: overlap 3, P = 3/4, R = 1.
  EXPECT_NEAR(f1_v1("the cat sat on the mat", "cat on mat"), 2 * 0.75 / 1.75, 1e-12);
  // multiset overlap: pred [x y y], gold [y y y z]: 2 shared, P = 2/3, R = 1/2 -> 4/7.
  EXPECT_NEAR(f1_v1("x y y", "y y y z"), 4.0 / 7.0, 1e-12);
  EXPECT_EQ(f1_v1("", ""), 0.0);  // v1.1: no overlap -> 0, even for two empty strings
  EXPECT_EQ(f1_v2("", ""), 1.0);  // v2.0: both empty -> 1
  EXPECT_EQ(f1_v2("the", "a"), 1.0);  // both normalise to empty
  EXPECT_EQ(f1_v2("cat", ""), 0.0);
}

TEST(SquadMetrics, V1MaxOverGoldsAndMissingCountsZero) {
  std::vector<SquadGold> gold = {{"q1", {"Denver Broncos", "Broncos"}}, {"q2", {"1990"}}, {"q3", {"blue whale"}}};
  std::map<std::string, std::string> preds = {{"q1", "broncos"}, {"q3", "the whale"}};  // q2 missing
  const auto s = evaluate_squad_v1(gold, preds);
  EXPECT_EQ(s.total, 3);
  // EM: q1 1, q2 0, q3 0 -> 33.33; F1: q1 1, q2 0, q3 [whale] vs [blue whale] = 2/3.
  EXPECT_NEAR(s.exact, 100.0 / 3.0, 1e-9);
  EXPECT_NEAR(s.f1, 100.0 * (1.0 + 2.0 / 3.0) / 3.0, 1e-9);
}

TEST(SquadMetrics, V2SplitsAndBestThreshold) {
  // q1, q2 answerable; q3, q4 unanswerable.
  std::vector<SquadGold> gold = {{"q1", {"paris"}}, {"q2", {"red car"}}, {"q3", {}}, {"q4", {}}};
  std::map<std::string, std::string> preds = {{"q1", "Paris"}, {"q2", "car"}, {"q3", ""}, {"q4", "london"}};
  const NaScores na = {{"q1", -2.0}, {"q2", 0.5}, {"q3", 1.0}, {"q4", -1.0}};
  const auto s = evaluate_squad_v2(gold, preds, na);
  EXPECT_EQ(s.has_ans_total, 2);
  EXPECT_EQ(s.no_ans_total, 2);
  // raw EM: q1 1, q2 0, q3 1, q4 0 -> 50; F1: q1 1, q2 2*(1*0.5)/1.5 = 2/3, q3 1, q4 0.
  EXPECT_NEAR(s.exact, 50.0, 1e-9);
  EXPECT_NEAR(s.f1, 100.0 * (1 + 2.0 / 3.0 + 1) / 4, 1e-9);
  EXPECT_NEAR(s.has_ans_f1, 100.0 * (1 + 2.0 / 3.0) / 2, 1e-9);
  EXPECT_NEAR(s.no_ans_exact, 50.0, 1e-9);
  // Sweep in na order q1(-2) q4(-1) q2(0.5) q3(1), starting from 2 (all null):
  // EM: +1 -> 3 (best, thresh -2), -1 -> 2, +0 -> 2, +0 -> 2  => best 75 at -2.
  // F1: +1 -> 3, -1 -> 2, +2/3 -> 2.667, +0 -> 2.667      => best 75 at -2.
  EXPECT_NEAR(s.best_exact, 75.0, 1e-9);
  EXPECT_DOUBLE_EQ(s.best_exact_thresh, -2.0);
  EXPECT_NEAR(s.best_f1, 75.0, 1e-9);
  EXPECT_DOUBLE_EQ(s.best_f1_thresh, -2.0);
}

// Equal no-answer scores are swept in the order of their file, as the official script's stable
// sort of its keys does; the best threshold depends on it. The dev order (used before) gave
// another best_exact than the script on a file listing ties otherwise.
TEST(SquadMetrics, V2TiedNoAnswerScoresAreSweptInTheirFilesOrder) {
  // q1 answerable and answered right; q2 unanswerable and answered: both scored 0.5.
  const std::vector<SquadGold> gold = {{"q1", {"paris"}}, {"q2", {}}};
  const std::map<std::string, std::string> preds = {{"q1", "Paris"}, {"q2", "london"}};
  // From 1 (all null: q2 right): q1 first, +1 -> 2 (best, at 0.5), then q2 -1 -> 1: 100 at 0.5.
  const auto q1_first = evaluate_squad_v2(gold, preds, {{"q1", 0.5}, {"q2", 0.5}});
  EXPECT_NEAR(q1_first.best_exact, 100.0, 1e-9);
  EXPECT_DOUBLE_EQ(q1_first.best_exact_thresh, 0.5);
  // q2 first: -1 -> 0, then +1 -> 1, never above the start: 50 at 0.
  const auto q2_first = evaluate_squad_v2(gold, preds, {{"q2", 0.5}, {"q1", 0.5}});
  EXPECT_NEAR(q2_first.best_exact, 50.0, 1e-9);
  EXPECT_DOUBLE_EQ(q2_first.best_exact_thresh, 0.0);
}

// As the official script: HasAns means the record lists an answer, even one that normalises to
// nothing (q1's "$", then scored against ""); with no-answer scores, a question scored above
// 1.0 counts as predicting "" in exact/f1 and the subsets, not in the threshold search.
TEST(SquadMetrics, V2HasAnsIsAnyListedAnswerAndScoresAboveOneCountAsNoAnswer) {
  std::vector<SquadGold> gold = {{"q1", {"$"}}, {"q2", {}}, {"q3", {"blue"}}, {"q4", {}}};
  std::map<std::string, std::string> preds = {{"q1", ""}, {"q2", ""}, {"q3", "blue"}, {"q4", "green"}};
  const NaScores na = {{"q1", 0.0}, {"q2", 0.0}, {"q3", 3.0}, {"q4", 2.0}};
  const auto s = evaluate_squad_v2(gold, preds, na);
  EXPECT_EQ(s.has_ans_total, 2);  // q1, q3
  EXPECT_EQ(s.no_ans_total, 2);
  // Raw EM: q1 1 ("" = ""), q2 1, q3 1, q4 0. Above 1.0: q3 -> "" (0), q4 -> "" (1).
  EXPECT_NEAR(s.exact, 75.0, 1e-9);
  EXPECT_NEAR(s.has_ans_exact, 50.0, 1e-9);
  EXPECT_NEAR(s.no_ans_exact, 100.0, 1e-9);
  EXPECT_NEAR(s.has_ans_f1, 50.0, 1e-9);
  // Sweep over raw scores in na order q1(0) q2(0) q4(2) q3(3) from 2: +1 -> 3 (best at 0), +0, -1, +1.
  EXPECT_NEAR(s.best_exact, 75.0, 1e-9);
  EXPECT_DOUBLE_EQ(s.best_exact_thresh, 0.0);
  // At another threshold (fine-tuning passes its finetune.null_threshold): 2.5 cuts q3 only.
  const auto at = evaluate_squad_v2(gold, preds, na, 2.5);
  EXPECT_NEAR(at.no_ans_exact, 50.0, 1e-9);
  EXPECT_NEAR(at.has_ans_exact, 50.0, 1e-9);
  // Without no-answer scores nothing is cut: q3 scores 1 and q4 0.
  const auto plain = evaluate_squad_v2(gold, preds, {});
  EXPECT_NEAR(plain.has_ans_exact, 100.0, 1e-9);
  EXPECT_NEAR(plain.no_ans_exact, 50.0, 1e-9);
}
