// Which of our rows stand beside the paper's numbers: only those of the paper's setting (its
// pretraining and fine-tuning lengths, method, whole dev sets); the others show "—" or are marked.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "eval/results.h"
#include "eval/squad_tables.h"
#include "eval/table_fixture.h"
#include "eval/tables.h"
#include "eval/text_table.h"

using namespace rpe::eval;
using rpe::test::squad_row;

namespace {
// A SQuAD row of `method` at clipping distance `k`, pretrained at `pre` and fine-tuned at `ft`.
ResultRow squad_at(const std::string& run, const std::string& method, int64_t k, int64_t pre, int64_t ft,
             const std::string& metric, double value) {
  auto r = squad_row(run, method, k, ft, 1, metric, value);
  r.pretrain_max_len = pre;
  return r;
}
}  // namespace

// The paper's Table 4 is pretrained at 512 and (its k rows) fine-tuned at 512. A model pretrained
// at 128 and fine-tuned at 512 is another experiment: it was given the paper's k = 16 row
// (83.42/90.18) for matching k and fine-tuning length alone. As in Table 2, a row fine-tuned at
// its own pretraining length is compared; longer lengths only at the paper's pretraining length.
TEST(Tables, Table4PaperRowsOnlyAtThePapersLengths) {
  const std::vector<ResultRow> rows = {
      squad_at("k16_pre128_ft512/seed1", "m4", 16, 128, 512, "exact", 70.0),  // 4x the pretraining length
      squad_at("k16_pre128_ft128/seed1", "m4", 16, 128, 128, "exact", 71.0),  // at its own length: k = 16
      squad_at("k256_pre128_ft576/seed1", "m4", 256, 128, 576, "exact", 72.0),
      squad_at("k256_pre512_ft576/seed1", "m4", 256, 512, 576, "exact", 73.0),  // the paper's own row
      squad_at("k16_pre512_ft384/seed1", "m4", 16, 512, 384, "exact", 74.0),   // shorter than pretraining
  };
  const std::string csv = render_tables(rows, {"4"}).csv;
  EXPECT_NE(csv.find("Table 4,m4,16,128,512,pre,EM,70.00,,1,,\n"), std::string::npos)
      << csv;
  EXPECT_NE(csv.find("Table 4,m4,16,128,128,pre,EM,71.00,,1,83.42,\n"),
            std::string::npos) << csv;
  EXPECT_NE(csv.find("Table 4,m4,256,128,576,pre,EM,72.00,,1,,\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("Table 4,m4,256,512,576,pre,EM,73.00,,1,83.80,\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("Table 4,m4,16,512,384,pre,EM,74.00,,1,,\n"), std::string::npos) << csv;
  // k = 0 (model.attention.max_relative: 0) is unclipped, the paper's k = 512: it had no paper row.
  const std::string unclipped = render_tables({squad_at("k0/seed1", "m4", 0, 128, 128, "exact", 75.0)}, {"4"}).csv;
  EXPECT_NE(unclipped.find(",75.00,,1,83.63,\n"), std::string::npos) << unclipped;
}

// The scaled Table 4 at n = 128 showed every SQuAD row beside a paper row: an absolute run (the
// paper's Table 4 is method 4's), a fine-tuning length of 96 (shorter than n; it was matched to
// the paper's 512/512), rows pretrained at 256 (under --pretrain-len 128 their ratios are not the
// paper's), and beyond n a k = 16 model forced onto the paper's k = 256 row. Now: method 4 rows
// pretrained at n only, fine-tuned at n (k as is) or beyond it (length and k scaled by 512/n).
TEST(ExtraTables, ScaledTable4KeepsMethod4AtItsPretrainingLengthAndScalesKBeyondIt) {
  const std::vector<ResultRow> rows = {
      squad_at("abs_s1/seed1", "absolute", 0, 128, 128, "f1", 60.0),
      squad_at("m4_k16_ft96_s1/seed1", "m4", 16, 128, 96, "f1", 61.0),
      squad_at("m4_k16_s1/seed1", "m4", 16, 128, 128, "f1", 62.0),
      squad_at("m4_k16_pre256_s1/seed1", "m4", 16, 256, 256, "f1", 63.0),
      squad_at("m4_k16_ft144_s1/seed1", "m4", 16, 128, 144, "f1", 64.0),  // k = 16 is the paper's 64, not 256
      squad_at("m4_k64_ft144_s1/seed1", "m4", 64, 128, 144, "f1", 65.0),  // k = n/2: the paper's 256 at 576
  };
  const TextTable t = table4_scaled(rows, {128, {16}, {144}});
  EXPECT_EQ(to_csv(t),
            "run,k,pretrain len,fine-tune len,EM,F1,seeds,paper row,paper EM,paper F1\n"
            "m4_k16_ft96,16,128,96,—,61.00,1,—,—,—\n"
            "m4_k16,16,128,128,—,62.00,1,\"k=16, 512\",83.42,90.18\n"
            "m4_k16_ft144,16,128,144,—,64.00,1,\"k=64, 576\",—,—\n"
            "m4_k64_ft144,64,128,144,—,65.00,1,\"k=256, 576\",83.80,90.71\n");
  EXPECT_EQ(t.notes, std::vector<std::string>{"left out: 2 row(s) of another method or not pretrained at length 128"});
  // Under --pretrain-len 256 only the row pretrained at 256 is left, at its own length: k = 16 as is.
  const TextTable t256 = table4_scaled(rows, {256, {16}, {}});
  ASSERT_EQ(t256.rows.size(), 1U) << to_csv(t256);
  EXPECT_EQ(t256.rows[0][0].text, "m4_k16_pre256");
  EXPECT_EQ(t256.rows[0][9].text, "90.18");
}

// A run scored on 300 of SQuAD 1.1 dev's 10,570 questions (finetune.max_eval_examples) was shown
// unmarked beside the paper's full-dev numbers whenever it was alone in its cell: only runs that
// scored fewer examples than another run of the cell were named. Each rendering now says "300 of
// 10570" (GLUE too, by its dev set's size); a run of the whole dev set stays unmarked.
TEST(Tables, PartialDevEvaluationsAloneInTheirCellAreMarked) {
  auto partial = squad_at("m4_s1/seed1", "m4", 127, 128, 128, "exact", 75.0);
  partial.examples = 300;
  auto whole = squad_at("abs_s1/seed1", "absolute", 0, 128, 128, "exact", 70.0);
  whole.examples = 10570;
  auto mrpc = squad_at("m4_mrpc_s1/seed1", "m4", 127, 128, 128, "f1", 80.0);
  mrpc.task = "mrpc";
  mrpc.examples = 200;
  const auto t = render_tables({partial, whole, mrpc}, {"2", "3"});
  EXPECT_NE(t.markdown.find("| m4 | 127 | 128 | 128 | pre | 75.00 (dev 300 of 10570) | 83.63 |"), std::string::npos)
      << t.markdown;
  EXPECT_NE(t.markdown.find("| absolute | — | 128 | 128 | pre | 70.00 | 81.58 |"), std::string::npos) << t.markdown;
  EXPECT_NE(t.markdown.find("80.00 (dev 200 of 408) | 88.88 |"), std::string::npos) << t.markdown;
  EXPECT_NE(t.markdown.find("\"(dev N of M)\": scored on N of the dev set's M examples only"), std::string::npos);
  EXPECT_NE(t.csv.find("Table 2,m4,127,128,128,pre,EM,75.00,,1,83.63,300 of 10570\n"), std::string::npos) << t.csv;
  EXPECT_NE(t.csv.find("Table 2,absolute,,128,128,pre,EM,70.00,,1,81.58,\n"), std::string::npos) << t.csv;
  EXPECT_EQ(t.json[2]["dev_examples"], "300 of 10570");  // absolute EM, F1, then m4 EM
  EXPECT_TRUE(t.json[0]["dev_examples"].is_null()) << t.json.dump();
  // The extra SQuAD tables mark the cell the same way, its JSON with the counts.
  const TextTable t4 = table4_scaled({partial}, {128, {127}, {}});
  ASSERT_EQ(t4.rows.size(), 1U);
  EXPECT_EQ(t4.rows[0][4].text, "75.00 (dev 300 of 10570)");
  EXPECT_EQ(t4.rows[0][8].text, "83.63");
  EXPECT_EQ(to_json(t4)["rows"][0]["EM"]["dev_examples"], 300);
  EXPECT_NE(to_markdown(t4).find("scored on N of SQuAD 1.1 dev's M questions only"), std::string::npos);
  EXPECT_EQ(table5({whole}, {128}).rows.at(1).at(4).text, "70.00");
}

// Table 5's paper numbers are of method 4 swapped into a pretrained absolute BERT-large: a deberta
// row was given them (any method but absolute was matched as m4), and nothing says that an m4 row
// pretrained with m4 is not such a swap. Now only m4 rows get them, and the title says what they are for.
TEST(ExtraTables, Table5PaperNumbersOnlyForMethod4AndLabelledAsSwaps) {
  const TextTable t = table5({squad_at("deb_s1/seed1", "deberta", 127, 128, 128, "f1", 60.0),
                              squad_at("m4_s1/seed1", "m4", 127, 128, 128, "f1", 61.0)},
                             {128});
  ASSERT_EQ(t.rows.size(), 3U);
  EXPECT_EQ(t.rows[1][1].text, "deberta");
  EXPECT_EQ(t.rows[1][8].text, "—");
  EXPECT_EQ(t.rows[2][8].text, "93.55");
  EXPECT_NE(to_markdown(t).find("do not record the pretraining method (written before pretrain_method) show the paper's "
                                "numbers: they compare with method 4 swapped into an absolute model"),
            std::string::npos) << to_markdown(t);
  // Only rows pretrained at the first length, and absolute ones fine-tuned at it: an absolute model
  // fine-tuned at 96 and an m4 model pretrained at 64 had the paper's numbers.
  const TextTable lengths = table5({squad_at("abs_s1/seed1", "absolute", 0, 128, 128, "f1", 70.0),
                                    squad_at("abs96_s1/seed1", "absolute", 0, 128, 96, "f1", 71.0),
                                    squad_at("m4pre64_s1/seed1", "m4", 63, 64, 144, "f1", 72.0),
                                    squad_at("m4_ft144_s1/seed1", "m4", 127, 128, 144, "f1", 73.0)},
                                   {128, 144});
  std::map<std::string, std::string> paper_f1;
  for (const auto& row : lengths.rows) paper_f1[row[0].text] = row[8].text;
  EXPECT_EQ(paper_f1.at("abs"), "93.15");
  EXPECT_EQ(paper_f1.at("abs96"), "—");
  EXPECT_EQ(paper_f1.at("m4pre64"), "—");
  EXPECT_NE(paper_f1.at("m4_ft144"), "—");
}
