// The reproduction's extra tables (cost, scaled Table 4, Table 5, extrapolation) against tables
// worked out by hand from small synthetic inputs, and their readers' bad-input errors.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "eval/cost_table.h"
#include "eval/squad_tables.h"
#include "eval/table_fixture.h"
#include "eval/tables.h"
#include "eval/text_table.h"
#include "util/atomic_file.h"
#include "util/errors.h"

using namespace rpe::eval;
using rpe::test::squad_row;
using rpe::test::temp_dir;
using rpe::test::write_text;

namespace {
// The message of the UserError `fn` throws ("" when it throws none).
template <typename Fn>
std::string user_error(Fn&& fn) {
  try {
    fn();
  } catch (const rpe::UserError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(ExtraTables, TextTableRenderings) {
  TextTable t{"t", "A title", {"a", "b, c"}, {{"x", Cell::integer(3)}, {"say \"hi\"", Cell::dash()}}, {}};
  EXPECT_EQ(to_markdown(t), "### A title\n\n| a | b, c |\n|---|---|\n| x | 3 |\n| say \"hi\" | — |\n");
  // RFC 4180: a comma or a quote makes a quoted field, inner quotes doubled.
  EXPECT_EQ(to_csv(t), "a,\"b, c\"\nx,3\n\"say \"\"hi\"\"\",—\n");
  const auto j = to_json(t);
  EXPECT_EQ(j["rows"][0]["b, c"], 3);
  EXPECT_TRUE(j["rows"][1]["b, c"].is_null());
  EXPECT_EQ(j["columns"][1], "b, c");
  EXPECT_EQ(with_thousands(1234567.4), "1,234,567");
  EXPECT_EQ(with_thousands(999.6), "1,000");
  EXPECT_EQ(with_thousands(12.0), "12");
  EXPECT_EQ(with_thousands(-1234.0), "-1,234");
  EXPECT_EQ(with_thousands(123456.0), "123,456");
  const Cell s = stat_cell({80.0, 82.0, 84.0}, true);
  EXPECT_EQ(s.text, "82.00 ± 2.00 (n=3)");  // sample std: sqrt((4 + 0 + 4) / 2)
  EXPECT_DOUBLE_EQ(s.value["std"].get<double>(), 2.0);
  EXPECT_EQ(stat_cell({}, true).text, "—");
  EXPECT_TRUE(stat_cell({80.0}, true).value["std"].is_null());  // one seed: no sample std
}

TEST(ExtraTables, ScaledTable4MatchesPaperRowsByKAndLengthRatio) {
  const std::vector<ResultRow> rows = {
      squad_row("m4_k2_s1/seed1", "m4", 2, 128, 1, "exact", 10.0),  // re-evaluated below: replaced
      squad_row("m4_k2_s1/seed1", "m4", 2, 128, 1, "exact", 70.0),
      squad_row("m4_k2_s1/seed1", "m4", 2, 128, 1, "f1", 80.0),
      squad_row("m4_k2_s2/seed2", "m4", 2, 128, 2, "exact", 72.0),
      squad_row("m4_k2_s2/seed2", "m4", 2, 128, 2, "f1", 84.0),
      squad_row("m4_k64_ft160_s1/seed1", "m4", 64, 160, 1, "f1", 88.0),  // no EM line
      squad_row("m4_k64_ft144_s1/seed1", "m4", 64, 144, 1, "exact", 76.0),
      squad_row("m4_k64_ft144_s1/seed1", "m4", 64, 144, 1, "f1", 86.0),
      squad_row("m4_k64_ft150_s1/seed1", "m4", 64, 150, 1, "f1", 87.0),  // 150/128 is no paper length
      squad_row("m4_k127_s1/seed1", "m4", 127, 128, 1, "exact", 75.0),
      squad_row("m4_k127_s1/seed1", "m4", 127, 128, 1, "f1", 85.0),
      squad_row("m4_k127_s1/seed1", "m4", 127, 128, 1, "HasAns_f1", 1.0),  // not EM/F1: ignored
  };
  auto mrpc = rows.front();
  mrpc.task = "mrpc";
  auto with_other = rows;
  with_other.push_back(mrpc);  // another task: ignored
  const TextTable t = table4_scaled(with_other, {128, {2, 127}, {144}});
  // Rows by (fine-tuning length, k). m4_k2: EM 70, 72 -> 71 ± sqrt(2); F1 80, 84 -> 82 ± sqrt(8).
  // k = 127 = n - 1 is unclipped: the paper's k = 512. 144, 160 = 128 * 576/512, 128 * 640/512.
  EXPECT_EQ(to_markdown(t),
            "### Table 4 (method 4 by k and fine-tuning length), pretraining length 128, k list [2, 127], long "
            "lengths [144]; paper row matched by k and length ratio\n\n"
            "| run | k | pretrain len | fine-tune len | EM | F1 | seeds | paper row | paper EM | paper F1 |\n"
            "|---|---|---|---|---|---|---|---|---|---|\n"
            "| m4_k2 | 2 | 128 | 128 | 71.00 ± 1.41 | 82.00 ± 2.83 | 2 | k=2, 512 | 82.17 | 89.19 |\n"
            "| m4_k127 | 127 | 128 | 128 | 75.00 | 85.00 | 1 | k=512, 512 | 83.63 | 90.53 |\n"
            "| m4_k64_ft144 | 64 | 128 | 144 | 76.00 | 86.00 | 1 | k=256, 576 | 83.80 | 90.71 |\n"
            "| m4_k64_ft150 | 64 | 128 | 150 | — | 87.00 | 1 | k=256, 600 | — | — |\n"
            "| m4_k64_ft160 | 64 | 128 | 160 | — | 88.00 | 1 | k=256, 640 | 83.97 | 90.68 |\n");
  const std::string csv = to_csv(t);
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "run,k,pretrain len,fine-tune len,EM,F1,seeds,paper row,paper EM,paper F1");
  EXPECT_NE(csv.find("\nm4_k2,2,128,128,71.00 ± 1.41,82.00 ± 2.83,2,\"k=2, 512\",82.17,89.19\n"), std::string::npos)
      << csv;
  const auto j = to_json(t);
  EXPECT_NEAR(j["rows"][0]["EM"]["std"].get<double>(), std::sqrt(2.0), 1e-12);
  EXPECT_EQ(j["rows"][0]["seeds"], 2);
  EXPECT_TRUE(j["rows"][3]["paper EM"].is_null());
}

TEST(ExtraTables, Table5AbsoluteFirstThenDropInByLength) {
  const std::vector<ResultRow> rows = {
      squad_row("drop_in_m4_ft160_s1/seed1", "m4", 127, 160, 1, "exact", 66.0),
      squad_row("drop_in_m4_ft160_s1/seed1", "m4", 127, 160, 1, "f1", 77.0),
      squad_row("drop_in_m4_ft128_s1/seed1", "m4", 127, 128, 1, "exact", 65.0),
      squad_row("drop_in_m4_ft128_s1/seed1", "m4", 127, 128, 1, "f1", 75.5),
      squad_row("drop_in_m4_ft200_s1/seed1", "m4", 127, 200, 1, "f1", 70.0),  // not in --lens: no paper row
      squad_row("absolute_ft128_s1/seed1", "absolute", 0, 128, 1, "exact", 60.0),
      squad_row("absolute_ft128_s1/seed1", "absolute", 0, 128, 1, "f1", 70.0),
      squad_row("absolute_ft128_s2/seed2", "absolute", 0, 128, 2, "exact", 62.0),
      squad_row("absolute_ft128_s2/seed2", "absolute", 0, 128, 2, "f1", 74.0),
  };
  const TextTable t = table5(rows, {128, 144, 160, 176});
  // Lengths are matched by position: 128 -> the paper's 512, 160 -> its 640.
  EXPECT_EQ(to_csv(t),
            "run,method,pretrain len,fine-tune len,EM,F1,seeds,paper EM,paper F1\n"
            "\"BERT (Devlin et al., published)\",absolute,512,512,—,—,0,84.10,90.90\n"
            "absolute_ft128,absolute,128,128,61.00 ± 1.41,72.00 ± 2.83,2,86.91,93.15\n"
            "drop_in_m4_ft128,m4,128,128,65.00,75.50,1,87.51,93.55\n"
            "drop_in_m4_ft160,m4,128,160,66.00,77.00,1,87.57,93.49\n"
            "drop_in_m4_ft200,m4,128,200,—,70.00,1,—,—\n");
  EXPECT_EQ(t.title, "Table 5: method 4 added to a pretrained absolute model (near drop-in), SQuAD 1.1 dev; "
                     "paper: BERT-large at 512/576/640/704, method 4 swapped into its pretrained absolute model");
  // These lines do not record the pretraining method: the note says what the numbers are for.
  ASSERT_EQ(t.notes.size(), 1U);
  EXPECT_NE(t.notes[0].find("do not record the pretraining method"), std::string::npos);
}

// Lines that record the weights' pretraining method (pretrain_method): m4 swapped into absolute
// pretraining is labelled so, gets Table 5's paper numbers and none in Tables 2-4; m4 pretrained
// as such gets Table 2's and none in Table 5; absolute pretrained as such keeps both tables'.
TEST(ExtraTables, SwappedMethodsAreRowsOfTheirOwnWithTheirOwnPaperNumbers) {
  auto row = [](const std::string& run, const std::string& method, const std::string& pretrained_with,
                const std::string& metric, double value, const std::string& pretrain_run) {
    ResultRow r = squad_row(run + "/seed1", method, method == "absolute" ? 0 : 127, 128, 1, metric, value, pretrain_run);
    r.pretrain_method = pretrained_with;
    return r;
  };
  const std::vector<ResultRow> rows = {
      row("abs_ft", "absolute", "absolute", "f1", 70.0, "runs/absolute"),
      row("swap_ft", "m4", "absolute", "f1", 75.0, "runs/swap_m4"),
      row("m4_ft", "m4", "m4", "f1", 80.0, "runs/m4"),
  };
  EXPECT_EQ(to_csv(table5(rows, {128})),
            "run,method,pretrain len,fine-tune len,EM,F1,seeds,paper EM,paper F1\n"
            "\"BERT (Devlin et al., published)\",absolute,512,512,—,—,0,84.10,90.90\n"
            "abs_ft,absolute,128,128,—,70.00,1,86.91,93.15\n"
            "m4_ft,m4,128,128,—,80.00,1,—,—\n"
            "swap_ft,m4 (swapped into absolute pretraining),128,128,—,75.00,1,87.51,93.55\n");
  EXPECT_TRUE(table5(rows, {128}).notes.empty());
  const RenderedTables t = render_tables(rows, {"2"});
  EXPECT_NE(t.csv.find("Table 2,m4,127,128,128,m4,F1,80.00,,1,90.53,"), std::string::npos) << t.csv;
  EXPECT_NE(t.csv.find("Table 2,m4 (swapped into absolute pretraining),127,128,128,swap_m4,F1,75.00,,1,,"),
            std::string::npos)
      << t.csv;
  EXPECT_NE(t.markdown.find("| m4 (swapped into absolute pretraining) |"), std::string::npos);
  bool tagged = false;
  for (const auto& j : t.json)
    if (j["pretrain_run"] == "swap_m4") tagged = j.value("pretrained_method", "") == "absolute" && j["paper"].is_null();
  EXPECT_TRUE(tagged);
  // The field survives a results file, and a line naming an unknown method is refused.
  const auto back = result_from_json(to_json(rows[1]), "r.jsonl:2");
  EXPECT_EQ(back.pretrain_method, "absolute");
  auto bad = to_json(rows[1]);
  bad["pretrain_method"] = "m7";
  EXPECT_EQ(user_error([&] { result_from_json(bad, "r.jsonl:2"); }), "r.jsonl:2: unknown pretrain_method 'm7'");
}

// A seed scored on part of the dev set (finetune.max_eval_examples, a debugging run) is another
// quantity: left out of the mean and the seed count, and named below the table, as Tables 2-4 do
// (it was pooled: 65.50 ± 39.40 over 3 seeds here).
TEST(ExtraTables, PartialDevEvaluationsAreNamedNotPooled) {
  std::vector<ResultRow> rows;
  for (const auto& [seed, f1, examples] : std::vector<std::tuple<int64_t, double, int64_t>>{
           {1, 88.0, 10570}, {2, 88.5, 10570}, {3, 20.0, 120}}) {
    const std::string run = "m4_ft128_s" + std::to_string(seed) + "/seed" + std::to_string(seed);
    for (const std::string metric : {"exact", "f1"}) {
      rows.push_back(squad_row(run, "m4", 127, 128, seed, metric, metric == "f1" ? f1 : f1 - 8));
      rows.back().examples = examples;
    }
  }
  const std::string note = "not pooled: m4_ft128_s3/seed3#3 (m4_ft128: 120 of 10570 dev questions)";
  const TextTable t5 = table5(rows, {128});
  EXPECT_EQ(t5.rows.at(1).at(5).text, "88.25 ± 0.35");
  EXPECT_EQ(t5.rows.at(1).at(6).text, "2");
  EXPECT_EQ(rpe::test::notes_but_lineage(t5.notes), std::vector<std::string>{note});
  EXPECT_NE(to_markdown(t5).find("\n- " + note + "\n"), std::string::npos) << to_markdown(t5);
  const TextTable t4 = table4_scaled(rows, {128, {127}, {}});
  EXPECT_EQ(t4.rows.at(0).at(5).text, "88.25 ± 0.35");
  EXPECT_EQ(t4.rows.at(0).at(6).text, "2");
  EXPECT_EQ(t4.notes, std::vector<std::string>{note});
  const TextTable tx = extrapolation_table({}, rows);
  EXPECT_EQ(tx.rows.at(0).at(4).text, "88.25 ± 0.35 (n=2)");
  EXPECT_EQ(tx.notes, std::vector<std::string>{note});
}

// Runs scored with their dev-best weights (finetune.select: best) are another protocol than the
// paper's fixed epochs and final weights: a row of their own, named so, without the paper's numbers.
TEST(ExtraTables, DevBestRunsAreRowsOfTheirOwnWithoutPaperNumbers) {
  auto best = [](ResultRow r) {
    r.select = "best";
    return r;
  };
  const std::vector<ResultRow> rows = {
      squad_row("drop_in_m4_ft128_s1/seed1", "m4", 127, 128, 1, "f1", 75.0),
      best(squad_row("drop_in_m4_ft128_s2/seed2", "m4", 127, 128, 2, "f1", 79.0)),
  };
  EXPECT_EQ(to_csv(table5(rows, {128})),
            "run,method,pretrain len,fine-tune len,EM,F1,seeds,paper EM,paper F1\n"
            "\"BERT (Devlin et al., published)\",absolute,512,512,—,—,0,84.10,90.90\n"
            "drop_in_m4_ft128,m4,128,128,—,75.00,1,87.51,93.55\n"
            "drop_in_m4_ft128 (select best),m4,128,128,—,79.00,1,—,—\n");
  const std::vector<ResultRow> k_rows = {
      squad_row("m4_k2_s1/seed1", "m4", 2, 128, 1, "f1", 80.0),
      best(squad_row("m4_k2_s1/seed1", "m4", 2, 128, 1, "f1", 83.0)),
  };
  const std::string csv = to_csv(table4_scaled(k_rows, ScaledTable4Spec{128, {2}, {}}));
  EXPECT_NE(csv.find("\nm4_k2,2,128,128,—,80.00,1,\"k=2, 512\",82.17,89.19\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\nm4_k2 (select best),2,128,128,—,83.00,1,\"k=2, 512\",—,—\n"), std::string::npos) << csv;
  // From random weights (--init none: pretrain_max_len 0): no pretraining length, no paper numbers.
  auto scratch = [](ResultRow r) {
    r.pretrain_max_len = 0;
    r.pretrain_run.clear();
    return r;
  };
  EXPECT_EQ(to_csv(table5({scratch(squad_row("scratch_m4_s1/seed1", "m4", 127, 128, 1, "f1", 40.0))}, {128})),
            "run,method,pretrain len,fine-tune len,EM,F1,seeds,paper EM,paper F1\n"
            "\"BERT (Devlin et al., published)\",absolute,512,512,—,—,0,84.10,90.90\n"
            "scratch_m4,m4,—,128,—,40.00,1,—,—\n");
  // The scaled Table 4 is of models pretrained at its n: a model from random weights is left out.
  const TextTable scratch_k = table4_scaled({scratch(k_rows[0])}, ScaledTable4Spec{128, {2}, {}});
  EXPECT_TRUE(scratch_k.rows.empty()) << to_csv(scratch_k);
  EXPECT_EQ(scratch_k.notes, std::vector<std::string>{"left out: 1 row(s) of another method or not pretrained at length 128"});
}

// The extra SQuAD tables grouped a row by the fine-tuning run's name alone: m4_ft128 fine-tuned
// from two pretraining runs (runs/lrA/base_m4, runs/lrB/base_m4), or from two checkpoints of one,
// was one row of two models, and lrB's seed 1 replaced lrA's (one run id): 71.00 ± 15.56 over
// "2 seeds" here. A row is one pretrained model, as in Tables 2-4, named where rows are alike in
// all else.
TEST(ExtraTables, FineTuningRunsOfOneNameFromTwoPretrainedModelsAreTwoRows) {
  auto from = [](const std::string& pretrain, int64_t seed, double f1, const std::string& checkpoint = "") {
    const std::string s = std::to_string(seed);
    auto r = squad_row("m4_ft128_s" + s + "/seed" + s, "m4", 127, 128, seed, "f1", f1, pretrain);
    r.pretrain_checkpoint = checkpoint;
    return r;
  };
  const std::vector<ResultRow> runs = {from("/w/lrA/base_m4", 1, 80.0), from("/w/lrA/base_m4/checkpoints", 2, 82.0),
                                       from("/w/lrB/base_m4", 1, 60.0)};
  EXPECT_EQ(to_csv(table5(runs, {128})),
            "run,method,pretrain len,fine-tune len,EM,F1,seeds,paper EM,paper F1\n"
            "\"BERT (Devlin et al., published)\",absolute,512,512,—,—,0,84.10,90.90\n"
            "m4_ft128 (pretraining run lrA/base_m4),m4,128,128,—,81.00 ± 1.41,2,87.51,93.55\n"
            "m4_ft128 (pretraining run lrB/base_m4),m4,128,128,—,60.00,1,87.51,93.55\n");
  const TextTable t4 = table4_scaled(runs, {128, {127}, {}});
  ASSERT_EQ(t4.rows.size(), 2U);
  EXPECT_EQ(t4.rows[0][0].text, "m4_ft128 (pretraining run lrA/base_m4)");
  EXPECT_EQ(t4.rows[0][5].text, "81.00 ± 1.41");
  EXPECT_EQ(t4.rows[1][0].text, "m4_ft128 (pretraining run lrB/base_m4)");
  EXPECT_EQ(t4.rows[1][5].text, "60.00");
  // Two checkpoints of one run (--init of its folder before and after a resumed pretraining).
  const std::vector<ResultRow> steps = {from("/w/p2", 1, 80.0, "step_00000400.pt"),
                                        from("/w/p2", 2, 82.0, "step_00000400.pt"),
                                        from("/w/p2", 1, 60.0, "step_00000420.pt")};
  EXPECT_EQ(to_csv(extrapolation_table({}, steps)),
            "method,measure,pretrain len,length,value\n"
            "m4 (pretraining run p2/step_00000400.pt),SQuAD F1,128,128,81.00 ± 1.41 (n=2)\n"
            "m4 (pretraining run p2/step_00000420.pt),SQuAD F1,128,128,60.00 (n=1)\n");
  // One pretrained model: the row's name alone, as before.
  EXPECT_EQ(table5({runs[0], runs[1]}, {128}).rows.at(1).at(0).text, "m4_ft128");
}

TEST(ExtraTables, ExtrapolationMlmCurvesThenSquadInCurveOrder) {
  const auto dir = temp_dir();
  write_text(dir / "mlm_m4.json",
             R"({"run": "r", "method": "m4", "pretrain_max_len": 128, "eval_file": "e.txt",
                 "mlm_loss": [{"length": 128, "loss": 2.5}, {"length": 256, "loss": 3.25}]})");
  write_text(dir / "mlm_abs.json",
             R"({"method": "absolute", "pretrain_max_len": 128, "mlm_loss": [{"length": 128, "loss": 2.0},
                 {"length": 256, "loss": null, "why": "longer than the 128-row table"}]})");
  const std::vector<MlmCurve> curves = {read_mlm_curve(dir / "mlm_m4.json"), read_mlm_curve(dir / "mlm_abs.json")};
  const std::vector<ResultRow> rows = {
      squad_row("alibi_ft128_s1/seed1", "alibi", 0, 128, 1, "f1", 50.0),  // no curve: after the curves' methods
      squad_row("absolute_ft128_s1/seed1", "absolute", 0, 128, 1, "f1", 70.0),
      squad_row("m4_ft192_s1/seed1", "m4", 127, 192, 1, "f1", 80.0),
      squad_row("m4_ft192_s2/seed2", "m4", 127, 192, 2, "f1", 82.0),
      squad_row("m4_ft128_s1/seed1", "m4", 127, 128, 1, "f1", 78.0),
      squad_row("m4_ft128_s1/seed1", "m4", 127, 128, 1, "exact", 1.0),  // EM: not in this table
  };
  const TextTable t = extrapolation_table(curves, rows);
  EXPECT_EQ(to_csv(t),
            "method,measure,pretrain len,length,value\n"
            "m4,MLM loss,128,128,2.500\n"
            "m4,MLM loss,128,256,3.250\n"
            "absolute,MLM loss,128,128,2.000\n"
            "absolute,MLM loss,128,256,n/a (longer than the 128-row table)\n"
            "m4,SQuAD F1,128,128,78.00 (n=1)\n"
            "m4,SQuAD F1,128,192,81.00 ± 1.41 (n=2)\n"
            "absolute,SQuAD F1,128,128,70.00 (n=1)\n"
            "alibi,SQuAD F1,128,128,50.00 (n=1)\n");
  const auto j = to_json(t);
  EXPECT_TRUE(j["rows"][3]["value"].is_null());
  EXPECT_DOUBLE_EQ(j["rows"][5]["value"]["mean"].get<double>(), 81.0);
  EXPECT_EQ(j["rows"][5]["value"]["n"], 2);
  rpe::test::remove_tree(dir);
}

// Two pretraining runs of one method and length (two seeds, two learning rates): their MLM rows
// name the run's folder, or the run as given where folders share a name; one of its kind stays
// the method alone.
TEST(ExtraTables, ExtrapolationCurvesOfOneMethodAndLengthNameTheirRuns) {
  auto curve = [](const std::string& run, const std::string& method, int64_t len) {
    MlmCurve c;
    c.run = run;
    c.method = method;
    c.pretrain_max_len = len;
    c.points = {{len, 2.0, ""}};
    return c;
  };
  const TextTable t = extrapolation_table({curve("runs/lr1/m4_s1/", "m4", 128), curve("runs/lr1/m4_s2", "m4", 128),
                                           curve("runs/lr2/m4_s2", "m4", 128), curve("runs/m4_long", "m4", 512),
                                           curve("runs/abs", "absolute", 128)},
                                          {});
  EXPECT_EQ(to_csv(t),
            "method,measure,pretrain len,length,value\n"
            "m4 (pretraining run m4_s1),MLM loss,128,128,2.000\n"
            "m4 (pretraining run runs/lr1/m4_s2),MLM loss,128,128,2.000\n"
            "m4 (pretraining run runs/lr2/m4_s2),MLM loss,128,128,2.000\n"
            "m4,MLM loss,512,512,2.000\n"
            "absolute,MLM loss,128,128,2.000\n");
}

// A deberta with log buckets is another model than the clipped one at the same k: a row of
// its own, named by its buckets (as Tables 2-4 name it), in Table 5 and the extrapolation table.
TEST(ExtraTables, LogBucketedDebertaIsARowOfItsOwn) {
  ResultRow clipped = squad_row("deb_s1/seed1", "deberta", 127, 128, 1, "f1", 60.0);
  ResultRow bucketed = squad_row("deb_s1/seed1", "deberta", 127, 128, 2, "f1", 70.0);
  bucketed.position_buckets = 32;
  ResultRow clipped_long = squad_row("deb_long_s1/seed1", "deberta", 127, 192, 1, "f1", 55.0);
  const std::vector<ResultRow> rows = {bucketed, clipped_long, clipped};
  EXPECT_EQ(to_csv(extrapolation_table({}, rows)),  // each model's lengths together
            "method,measure,pretrain len,length,value\n"
            "deberta,SQuAD F1,128,128,60.00 (n=1)\n"
            "deberta,SQuAD F1,128,192,55.00 (n=1)\n"
            "deberta (32 log buckets),SQuAD F1,128,128,70.00 (n=1)\n");
  const TextTable t5 = table5({clipped, bucketed}, {128});
  ASSERT_EQ(t5.rows.size(), 3U);  // the paper's BERT row, then ours
  EXPECT_EQ(t5.rows[1][1].text, "deberta");
  EXPECT_EQ(t5.rows[2][1].text, "deberta (32 log buckets)");
}

TEST(ExtraTables, CostTableFromRunFolders) {
  const auto dir = temp_dir();
  std::filesystem::create_directories(dir / "m4" / "checkpoints");
  write_text(dir / "m4" / "summary.json",
             R"({"method": "m4", "steps": 12, "wall_s": 33.6, "train_s": 40.2, "valid_loss": 6.12345, "peak_device_bytes": 0,
                 "peak_rss_bytes": 1610612736, "parameters": 1104000, "position_parameters": 8191})");
  // The first window (start-up) is dropped; held-out rows are not training speed.
  write_text(dir / "m4" / "metrics.jsonl",
             "{\"step\": 4, \"tokens_per_s\": 100.0}\n{\"step\": 8, \"tokens_per_s\": 12000.0}\n"
             "{\"step\": 8, \"split\": \"valid\", \"tokens_per_s\": 1.0}\n\n{\"step\": 12, \"tokens_per_s\": 13002.0}\n");
  // A refused --resume of another model logged its counts last: summary.json's win.
  write_text(dir / "m4" / "train.log",
             "model | 1.10M parameters, 8191 in position method\nmodel | 1.05M parameters, 4095 in position method\n");
  std::filesystem::create_directories(dir / "abs_run");
  write_text(dir / "abs_run" / "summary.json",
             R"({"wall_s": 7.5, "valid_loss": null, "peak_device_bytes": 2147483648, "peak_rss_bytes": 5, "world_size": 2})");
  write_text(dir / "abs_run" / "metrics.jsonl", "{\"step\": 4, \"tokens_per_s\": 2500.4}\n");
  // An older summary without counts: train.log's last line.
  write_text(dir / "abs_run" / "train.log",
             "model | 1.05M parameters, 4095 in position method\nmodel | 0.97M parameters, 0 in position method\n");
  const TextTable t = cost_table({read_run_cost(dir / "m4"), read_run_cost((dir / "abs_run").string() + "/")});
  // m4: median(12000, 13002) = 12501; 1610612736 B = 1536 MiB; the counts of summary.json.
  // abs_run: no method in summary.json -> the folder's name; 2 GiB on the device; no steps, no
  // loss; the last parameter line of train.log.
  // Training time: train_s (every process of a resumed run), else (older summaries) wall_s.
  // Ranks: m4's summary names none (no per-rank speed); abs_run's world_size, 2 ranks.
  EXPECT_EQ(to_csv(t),
            "method,run,position parameters,total parameters,ranks,tokens/s (median),tokens/s per rank (median),"
            "peak memory,steps,train s,held-out MLM loss\n"
            "m4,m4,\"8,191\",1.10M,—,\"12,501\",—,\"1,536 MiB (process RSS)\",12,40,6.123\n"
            "abs_run,abs_run,0,0.97M,2,\"2,500\",\"1,250\",\"2,048 MiB (GPU)\",—,8,—\n");
  rpe::test::remove_tree(dir);
}

// A run resumed on another number of ranks: one median per number of ranks (their total
// tokens/s are not one speed), and per rank every window divided by the ranks it ran on.
TEST(ExtraTables, CostTableOfARunResumedOnMoreRanks) {
  const auto dir = temp_dir();
  std::filesystem::create_directories(dir / "m4");
  write_text(dir / "m4" / "summary.json",
             R"({"method": "m4", "steps": 16, "world_size": 4, "world_sizes": [
                   {"first_step": 1, "last_step": 4, "world_size": null},
                   {"first_step": 5, "last_step": 8, "world_size": 2},
                   {"first_step": 9, "last_step": 16, "world_size": 4}]})");
  // Step 2's window is start-up (dropped); step 4's ran on ranks not recorded (no per-rank speed).
  write_text(dir / "m4" / "metrics.jsonl",
             "{\"step\": 2, \"tokens_per_s\": 10.0}\n{\"step\": 4, \"tokens_per_s\": 999.0}\n"
             "{\"step\": 6, \"tokens_per_s\": 1900.0}\n{\"step\": 8, \"tokens_per_s\": 2100.0}\n"
             "{\"step\": 12, \"tokens_per_s\": 4100.0}\n{\"step\": 16, \"tokens_per_s\": 3900.0}\n");
  const TextTable t = cost_table({read_run_cost(dir / "m4")});
  ASSERT_EQ(t.rows.size(), 1U);
  const auto& row = t.rows[0];
  EXPECT_EQ(row[4].text, "?, 2, 4");
  EXPECT_EQ(row[4].value.size(), 3U);
  EXPECT_EQ(row[5].text, "999 (? ranks); 2,000 (2 ranks); 4,000 (4 ranks)");
  // Per rank: 950, 1050, 1025, 975 -> median 1,000.
  EXPECT_EQ(row[6].text, "1,000");
  EXPECT_DOUBLE_EQ(row[6].value.get<double>(), 1000.0);
  write_text(dir / "m4" / "summary.json", R"({"world_sizes": [{"first_step": 1, "world_size": 2}]})");
  EXPECT_EQ(user_error([&] { read_run_cost(dir / "m4"); }),
            (dir / "m4" / "summary.json").string() +
                ": field 'world_sizes' holds an entry that is not {first_step, last_step, world_size}: "
                "{\"first_step\":1,\"world_size\":2}");
  rpe::test::remove_tree(dir);
}

TEST(ExtraTables, BadInputsNameTheFile) {
  const auto dir = temp_dir();
  std::filesystem::create_directories(dir / "unfinished");
  EXPECT_NE(user_error([&] { read_run_cost(dir / "unfinished"); }).find("unfinished/summary.json: missing"),
            std::string::npos);
  std::filesystem::create_directories(dir / "run");
  write_text(dir / "run" / "summary.json", "{\"steps\": 3");
  EXPECT_NE(user_error([&] { read_run_cost(dir / "run"); }).find("run/summary.json: malformed JSON"), std::string::npos);
  write_text(dir / "run" / "summary.json", "{\"steps\": \"many\"}");
  write_text(dir / "run" / "metrics.jsonl", "{\"tokens_per_s\": 1}\n");
  EXPECT_NE(user_error([&] { read_run_cost(dir / "run"); }).find("summary.json: field 'steps' is not a number"),
            std::string::npos);
  write_text(dir / "run" / "summary.json", "{\"steps\": 3}");
  write_text(dir / "run" / "metrics.jsonl", "{\"tokens_per_s\": 1}\n{\"tokens_\n");
  EXPECT_NE(user_error([&] { read_run_cost(dir / "run"); }).find("run/metrics.jsonl:2: malformed JSON line"),
            std::string::npos);
  ::unlink((dir / "run" / "metrics.jsonl").c_str());
  EXPECT_NE(user_error([&] { read_run_cost(dir / "run"); }).find("run/metrics.jsonl"), std::string::npos);
  EXPECT_NE(user_error([&] { read_mlm_curve(dir / "nope.json"); }).find("nope.json"), std::string::npos);
  write_text(dir / "mlm.json", "[1, 2");
  EXPECT_NE(user_error([&] { read_mlm_curve(dir / "mlm.json"); }).find("mlm.json: malformed JSON"), std::string::npos);
  write_text(dir / "mlm.json", "{\"method\": \"m4\", \"mlm_loss\": []}");
  EXPECT_NE(user_error([&] { read_mlm_curve(dir / "mlm.json"); }).find("mlm.json: expected {"), std::string::npos);
  EXPECT_NE(user_error([&] { read_results(dir / "missing.jsonl"); }).find("missing.jsonl"), std::string::npos);
  rpe::test::remove_tree(dir);
}

// 1e400 overflows a double: nlohmann throws out_of_range (not parse_error) while parsing, which
// must still be a UserError naming the file (and the line of a JSON-lines file).
TEST(ExtraTables, NumberOverflowNamesTheFile) {
  const auto dir = temp_dir();
  std::filesystem::create_directories(dir / "run");
  write_text(dir / "run" / "summary.json", "{\"steps\": 3, \"train_s\": 1e400}");
  write_text(dir / "run" / "metrics.jsonl", "{\"tokens_per_s\": 1}\n");
  EXPECT_EQ(user_error([&] { read_run_cost(dir / "run"); }),
            (dir / "run" / "summary.json").string() + ": malformed JSON (number overflow parsing '1e400')");
  write_text(dir / "run" / "summary.json", "{\"steps\": 3}");
  write_text(dir / "run" / "metrics.jsonl", "{\"tokens_per_s\": 1}\n{\"tokens_per_s\": -1e400}\n");
  EXPECT_EQ(user_error([&] { read_run_cost(dir / "run"); }),
            (dir / "run" / "metrics.jsonl").string() + ":2: malformed JSON line (number overflow parsing '-1e400')");
  write_text(dir / "mlm.json", "{\"method\": \"m4\", \"pretrain_max_len\": 128, \"mlm_loss\": [{\"length\": 1e999}]}");
  EXPECT_EQ(user_error([&] { read_mlm_curve(dir / "mlm.json"); }),
            (dir / "mlm.json").string() + ": malformed JSON (number overflow parsing '1e999')");
  rpe::test::remove_tree(dir);
}

// A run folder named with a Latin-1 byte: its name reaches cost.json, which nlohmann refuses to
// dump as it is (type_error 316). All three files are written, the byte shown as U+FFFD.
TEST(ExtraTables, NonUtf8RunNamesStillWriteAllThreeFiles) {
  const auto dir = temp_dir();
  RunCost c;
  c.run = "run\xe9";
  c.method = "m4";
  c.tokens_per_s = {{4, 100}};
  write_table(dir / "out", cost_table({c}));
  for (const char* ext : {".md", ".csv", ".json"})
    EXPECT_TRUE(std::filesystem::is_regular_file(dir / "out" / (std::string("cost") + ext))) << ext;
  const auto j = nlohmann::json::parse(rpe::read_file(dir / "out" / "cost.json"));
  EXPECT_EQ(j["rows"][0]["run"], "run\xef\xbf\xbd");
  rpe::test::remove_tree(dir);
}
