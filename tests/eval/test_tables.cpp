// Result lines -> tables: mean ± sample std over seeds next to the paper's numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "eval/results.h"
#include "eval/squad_tables.h"
#include "eval/table_fixture.h"
#include "eval/tables.h"
#include "util/atomic_file.h"
#include "util/errors.h"

using namespace rpe::eval;
using rpe::test::squad_row;

TEST(Tables, MeanStdAndPaperColumns) {
  const auto s = mean_std({80.0, 82.0, 84.0});
  EXPECT_DOUBLE_EQ(s.mean, 82.0);
  EXPECT_DOUBLE_EQ(s.std, 2.0);  // sample std: sqrt((4 + 0 + 4) / 2)
  std::vector<ResultRow> rows;
  for (int seed = 1; seed <= 3; ++seed)
    for (const char* metric : {"exact", "f1"})
      rows.push_back(squad_row("ft/seed" + std::to_string(seed), "m4", 127, 128, seed, metric,
                               std::string(metric) == "exact" ? 78.0 + 2 * seed : 90.0, "runs/tiny_m4"));
  const auto t = render_tables(rows);
  EXPECT_NE(t.markdown.find("| m4 | 127 | 128 | 128 | tiny_m4 | 82.00 ± 2.00 (n=3) | 83.63 |"), std::string::npos)
      << t.markdown;
  EXPECT_NE(t.csv.find("Table 2,m4,127,128,128,tiny_m4,F1,90.00,0.00,3,90.53"), std::string::npos) << t.csv;
  // The paper's Table 2 is unclipped and fine-tuned at the pretraining length: a row clipped
  // shorter or fine-tuned longer is another experiment, shown without a paper number.
  for (const auto& [k, ft] : std::vector<std::pair<int64_t, int64_t>>{{16, 128}, {127, 384}}) {
    auto other = rows.front();
    other.k = k;
    other.finetune_max_len = ft;
    const auto t2 = render_tables({other}, {"2"});
    const std::string want = "Table 2,m4," + std::to_string(k) + ",128," + std::to_string(ft) + ",tiny_m4,EM,80.00,,1,,\n";
    EXPECT_NE(t2.csv.find(want), std::string::npos) << t2.csv;
  }
  EXPECT_NE(t.markdown.find("## Table 4"), std::string::npos);  // m4 SQuAD rows also fill Table 4
  // --only: just the named tables.
  const auto only2 = render_tables(rows, {"2"});
  EXPECT_NE(only2.markdown.find("## Table 2"), std::string::npos);
  EXPECT_EQ(only2.markdown.find("## Table 4"), std::string::npos) << only2.markdown;
  EXPECT_EQ(only2.csv.find("Table 4,"), std::string::npos);
  EXPECT_THROW(render_tables(rows, {"5"}), rpe::UserError);
  // A method without a clipping distance (k = 0) shows no k.
  auto abs_row = rows.front();
  abs_row.method = "absolute";
  abs_row.k = 0;
  const auto with_abs = render_tables({abs_row}, {"2"});
  EXPECT_NE(with_abs.markdown.find("| absolute | — | 128 | 128 |"), std::string::npos) << with_abs.markdown;
  EXPECT_NE(with_abs.csv.find("Table 2,absolute,,128,128,tiny_m4,EM,80.00,,1,81.58"), std::string::npos)
      << with_abs.csv;
  // One seed has no sample std: empty in the CSV, null in the JSON (not 0.00, an error bar of 0).
  ASSERT_FALSE(with_abs.json.empty());
  EXPECT_TRUE(with_abs.json[0]["std"].is_null()) << with_abs.json.dump();
  EXPECT_EQ(with_abs.json[0]["n"], 1);
}

// Rows are the same experiment whatever the --init spelling ("runs/pre/" is "runs/pre"); an
// evaluation on part of the dev set (max_eval_examples) is left out of the mean and named; an
// unclipped m4 (k = n - 1 = 511) sits beside the paper's "k = 512" row of Table 4.
TEST(Tables, OneRowPerRunOnlyWholeDevSetsAndTheUnclippedPaperRow) {
  std::vector<ResultRow> rows;
  for (int seed = 1; seed <= 3; ++seed) {
    auto r = squad_row("ft/seed" + std::to_string(seed), "m4", 511, 512, seed, "f1", 88.0 + seed,
                       seed == 2 ? "runs/pre/" : "runs/pre");
    r.pretrain_max_len = 512;
    r.examples = seed == 3 ? 100 : 10570;
    rows.push_back(r);
  }
  const auto t = render_tables(rows, {"4"});
  EXPECT_NE(t.markdown.find("| m4 | 511 | 512 | 512 | pre | — | 83.63 | 89.50 ± 0.71 (n=2) | 90.53 |"),
            std::string::npos) << t.markdown;
  EXPECT_NE(t.markdown.find("- ft/seed3#3 (squad_v1 dev: 100 of 10570 examples)"), std::string::npos) << t.markdown;
}

// Table 4 lists its rows as the paper does: every k at the pretraining length first, then the
// longer fine-tuning lengths (by k, then length, 576 would sit between k = 256 and k = 512).
TEST(Tables, Table4RowsByFineTuneLengthThenK) {
  std::vector<ResultRow> rows;
  for (const auto& [k, ft] : std::vector<std::pair<int64_t, int64_t>>{{511, 512}, {256, 576}, {256, 512}, {2, 512}}) {
    std::ostringstream run;  // not "k" + std::to_string(k) + ...: GCC 12 warns falsely on that (-Wstringop-overflow)
    run << "k" << k << "_" << ft << "/seed1";
    auto r = squad_row(run.str(), "m4", k, ft, 1, "f1", 90.0);
    r.pretrain_max_len = 512;
    rows.push_back(r);
  }
  std::string order;
  for (const auto& j : render_tables(rows, {"4"}).json)
    if (j["column"] == "F1") order += std::to_string(j["k"].get<int64_t>()) + "/" + j["finetune_max_len"].dump() + " ";
  EXPECT_EQ(order, "2/512 256/512 511/512 256/576 ");
}

// Dev-best weights (select: best) are another protocol than the paper's fixed epochs: their seeds
// form a row of their own, named, with no paper number; and two steps of one pretraining run
// (--init of a checkpoint file) are two models, two rows.
TEST(Tables, ProtocolsAndCheckpointsAreRowsOfTheirOwn) {
  std::vector<ResultRow> rows;
  for (int seed = 1; seed <= 2; ++seed) {
    rows.push_back(squad_row("final/seed" + std::to_string(seed), "m4", 127, 128, seed, "exact", 80.0 + seed));
    auto best = squad_row("best/seed" + std::to_string(seed), "m4", 127, 128, seed, "exact", 90.0 + seed);
    best.select = "best";
    rows.push_back(best);
  }
  const auto t = render_tables(rows, {"2"});
  EXPECT_NE(t.csv.find("Table 2,m4,127,128,128,pre,EM,81.50,0.71,2,83.63"), std::string::npos) << t.csv;
  EXPECT_NE(t.csv.find("Table 2,m4 (select best),127,128,128,pre,EM,91.50,0.71,2,,\n"), std::string::npos) << t.csv;
  std::vector<ResultRow> steps;
  for (const char* ck : {"runs/m4/checkpoints/step_00000100.pt", "runs/m4/checkpoints/step_00000200.pt"})
    steps.push_back(squad_row("ft/seed1", "m4", 127, 128, 1, "exact", 70.0, ck));
  steps[1].run_id = "ft2/seed1";
  const auto s = render_tables(steps, {"2"});
  EXPECT_NE(s.csv.find(",m4/step_00000100.pt,EM,70.00,,1,"), std::string::npos) << s.csv;
  EXPECT_NE(s.csv.find(",m4/step_00000200.pt,EM,70.00,,1,"), std::string::npos) << s.csv;
  // select survives the result line; lines written before the field read as final.
  auto j = to_json(rows[1]);
  EXPECT_EQ(result_from_json(j, "x").select, "best");
  j.erase("select");
  EXPECT_EQ(result_from_json(j, "x").select, "final");
}

// A deberta with log buckets is another model than the clipped one at the same k (where its
// buckets end): a row of its own, named with its buckets; the field survives the result line, and
// lines without it (every other method, and those of before it) read as none.
TEST(Tables, LogBucketsAreARowOfTheirOwn) {
  std::vector<ResultRow> rows;
  for (int seed = 1; seed <= 2; ++seed) {
    rows.push_back(squad_row("clipped/seed" + std::to_string(seed), "deberta", 511, 512, seed, "exact", 80.0 + seed));
    auto bucketed = squad_row("buckets/seed" + std::to_string(seed), "deberta", 511, 512, seed, "exact", 90.0 + seed);
    bucketed.position_buckets = 256;
    rows.push_back(bucketed);
  }
  const auto t = render_tables(rows, {"2"});
  EXPECT_NE(t.csv.find("Table 2,deberta,511,128,512,pre,EM,81.50,0.71,2,"), std::string::npos) << t.csv;
  EXPECT_NE(t.csv.find("Table 2,deberta (256 log buckets),511,128,512,pre,EM,91.50,0.71,2,"), std::string::npos) << t.csv;
  auto j = to_json(rows[1]);
  EXPECT_EQ(j.at("position_buckets"), 256);
  EXPECT_EQ(result_from_json(j, "x").position_buckets, 256);
  EXPECT_FALSE(to_json(rows[0]).contains("position_buckets"));
  EXPECT_EQ(result_from_json(to_json(rows[0]), "x").position_buckets, 0);
  j["position_buckets"] = -2;
  EXPECT_THROW(result_from_json(j, "x"), rpe::UserError);
}

// Rows follow the paper's order of methods (absolute, Shaw, methods 1-4), then the methods it
// lacks, alphabetically.
TEST(Tables, RowsInThePapersOrderOfMethods) {
  std::vector<ResultRow> rows;
  for (const char* m : {"rope", "m4", "shaw", "alibi", "m1", "absolute"})
    rows.push_back(squad_row(std::string(m) + "/seed1", m, 0, 128, 1, "exact", 70.0));
  std::string order;
  for (const auto& j : render_tables(rows, {"2"}).json)
    if (j["column"] == "EM") order += j["method"].get<std::string>() + " ";
  EXPECT_EQ(order, "absolute shaw m1 m4 alibi rope BERT (Devlin et al., published) ");
}

TEST(Tables, ResultLinesRoundTripAndRejectGarbage) {
  const auto dir = rpe::test::temp_dir();
  ResultRow r;
  r.run_id = "x/seed1";
  r.method = "absolute";
  r.task = "mrpc";
  r.split = "dev";
  r.metric = "f1";
  r.value = 81.5;
  append_results(dir / "r.jsonl", {r, r});
  const auto back = read_results(dir / "r.jsonl");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].metric, "f1");
  EXPECT_DOUBLE_EQ(back[1].value, 81.5);
  // A line a crash cut short (the last, without its newline) is left out; the next append cuts
  // it off, so the lines after it stand and the file holds whole lines only.
  const std::string whole = to_json(r).dump();
  {
    std::ofstream(dir / "r.jsonl", std::ios::app) << whole.substr(0, whole.size() / 2);
  }
  EXPECT_EQ(read_results(dir / "r.jsonl").size(), 2u);
  append_results(dir / "r.jsonl", {r});
  EXPECT_EQ(read_results(dir / "r.jsonl").size(), 3u);
  EXPECT_EQ(rpe::read_file(dir / "r.jsonl"), whole + "\n" + whole + "\n" + whole + "\n");
  // A whole last line that only lacks its newline (saved by an editor) is kept and ended.
  std::ofstream(dir / "edited.jsonl") << whole << "\n" << whole;
  append_results(dir / "edited.jsonl", {r});
  EXPECT_EQ(rpe::read_file(dir / "edited.jsonl"), whole + "\n" + whole + "\n" + whole + "\n");
  // Anything else that is not a result line is refused, naming the line: a line cut short
  // that ends in a newline was not torn by a crash.
  for (const std::string bad : {"{\"run_id\": 3}", "garbage}", "{\"run_id\": \"x\"} trailing", "{\"run_id\": "}) {
    const std::string copy = (dir / "bad.jsonl").string();
    std::ofstream(copy) << whole << "\n" << bad << "\n";
    try {
      read_results(copy);
      FAIL() << "expected a UserError for " << bad;
    } catch (const rpe::UserError& e) {
      EXPECT_NE(std::string(e.what()).find("bad.jsonl:2"), std::string::npos) << e.what();
    }
  }
  // Rows no table can place: named with their line, not shown as rows of their own or dropped.
  const std::vector<std::pair<std::string, std::string>> unplaceable = {
      {"method", "unknown method 'm99'"}, {"task", "unknown task 'squad_v9' (valid: squad_v1, squad_v2, cola"},
      {"k", "field 'k' -5 is negative"}};
  for (const auto& [field, message] : unplaceable) {
    auto j = to_json(r);
    j[field] = field == "method" ? nlohmann::json("m99") : field == "task" ? nlohmann::json("squad_v9") : nlohmann::json(-5);
    std::ofstream(dir / "odd.jsonl") << whole << "\n" << j.dump() << "\n";
    try {
      read_results(dir / "odd.jsonl");
      FAIL() << "expected a UserError for " << j.dump();
    } catch (const rpe::UserError& e) {
      EXPECT_NE(std::string(e.what()).find("odd.jsonl:2: " + message), std::string::npos) << e.what();
    }
  }
  rpe::test::remove_tree(dir);
}

// Run ids are the run folder's name (+ seed): two folders of one name, runs/lr3e-5/squad and
// runs/lr5e-5/squad, wrote the same id and the tables silently kept the later line. The lines
// carry their folder (read back; absent in lines of before the field), and the tables say so.
TEST(Tables, OneRunIdFromTwoFoldersIsNamed) {
  const auto dir = rpe::test::temp_dir();
  auto a = squad_row("squad/seed1", "m4", 127, 128, 1, "f1", 80.0), b = a, c = a;
  a.run_dir = "/runs/lr3e-5/squad";
  b.run_dir = "/runs/lr5e-5/squad";
  b.value = 60.0;
  c.run_dir = a.run_dir;  // a re-evaluation of the first: no clash
  append_results(dir / "r.jsonl", {a, c});
  const auto back = read_results(dir / "r.jsonl");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].run_dir, "/runs/lr3e-5/squad");
  EXPECT_TRUE(run_id_clashes(back).empty());
  ResultRow old = a;
  old.run_dir.clear();  // a line written before the field: no folder, no clash claimed
  EXPECT_TRUE(run_id_clashes({a, old, c}).empty());
  const std::string note = "run id squad/seed1 (seed 1) names two runs, /runs/lr3e-5/squad and /runs/lr5e-5/squad: "
                           "the tables keep the later line (give the runs folders of distinct names, or separate "
                           "finetune.results_file)";
  EXPECT_EQ(run_id_clashes({a, b, c}), std::vector<std::string>{note});
  // One name for two runs of other methods: two rows of the tables, nothing replaced, no note.
  ResultRow other = b;
  other.method = "absolute";
  EXPECT_TRUE(run_id_clashes({a, other}).empty());
  EXPECT_EQ(render_tables({a, other}, {"2"}).markdown.find("Warning"), std::string::npos);
  const auto t = render_tables({a, b}, {"2"});
  EXPECT_NE(t.markdown.find("**Warning**: results of different runs under one name:\n- " + note + "\n"),
            std::string::npos) << t.markdown;
  EXPECT_EQ(render_tables({a, c}, {"2"}).markdown.find("Warning"), std::string::npos);
  EXPECT_EQ(rpe::test::notes_but_lineage(table5({a, b}, {128}).notes), std::vector<std::string>{note});
  rpe::test::remove_tree(dir);
}

// Two pretraining runs of one folder name (runs/lrA/base_m4, runs/lrB/base_m4) are two models:
// two rows, named by as many folders above them as tell them apart, not one row pooling their
// seeds (which it did when a row was keyed by the folder's name alone).
TEST(Tables, PretrainingRunsOfOneNameAreNotPooled) {
  auto a = squad_row("ft_a/seed1", "m4", 127, 128, 1, "f1", 80.0, "/runs/lrA/base_m4");
  auto b = squad_row("ft_b/seed1", "m4", 127, 128, 1, "f1", 60.0, "/runs/lrB/base_m4/");
  // The same pretraining run as a, seed 2 of a's fine-tuning experiment (the reproduction's folder per seed).
  auto c = squad_row("ft_a_s2/seed2", "m4", 127, 128, 2, "f1", 70.0, "/runs/lrA/base_m4/checkpoints");
  auto d = squad_row("ft_d/seed1", "m4", 127, 128, 1, "f1", 50.0, "/runs/lrA/base_m4/checkpoints/step_00000010.pt");
  const auto t = render_tables({a, b, c, d}, {"2"});
  EXPECT_NE(t.markdown.find("| lrA/base_m4 | — | 83.63 | 75.00 ± 7.07 (n=2) |"), std::string::npos) << t.markdown;
  EXPECT_NE(t.markdown.find("| lrB/base_m4 | — | 83.63 | 60.00 |"), std::string::npos) << t.markdown;
  EXPECT_NE(t.markdown.find("| base_m4/step_00000010.pt | — | 83.63 | 50.00 |"), std::string::npos) << t.markdown;
  // One run of that name: its name alone, as before.
  EXPECT_NE(render_tables({a, c}, {"2"}).markdown.find("| base_m4 | — | 83.63 | 75.00 ± 7.07 (n=2) |"), std::string::npos);
}

// Numbers nlohmann cannot hold (1e400: out_of_range, not parse_error) name file:line; integer
// fields refuse fractions, which nlohmann would truncate (k 8.5 matched to the paper's k=8).
TEST(Tables, ResultLinesRefuseOverflowFractionalIntegersAndValuesOutOfRange) {
  const auto dir = rpe::test::temp_dir();
  const std::string line = to_json(squad_row("r/seed1", "m4", 8, 128, 1, "f1", 70.5)).dump();
  auto with = [&](const std::string& from, const std::string& to) {
    std::string l = line;
    const size_t at = l.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    l.replace(at, from.size(), to);
    std::ofstream(dir / "r.jsonl") << l << "\n";
    return (dir / "r.jsonl").string();
  };
  auto with_metric = [&](const std::string& metric, const std::string& value) {
    std::string l = line;
    l.replace(l.find("\"metric\":\"f1\""), 13, "\"metric\":\"" + metric + "\"");
    l.replace(l.find("\"value\":70.5"), 12, "\"value\":" + value);
    std::ofstream(dir / "r.jsonl") << l << "\n";
    return (dir / "r.jsonl").string();
  };
  auto error = [](const std::string& file) -> std::string {
    try {
      read_results(file);
    } catch (const rpe::UserError& e) {
      return e.what();
    }
    return "";
  };
  const std::string f = (dir / "r.jsonl").string();
  EXPECT_EQ(error(with("\"value\":70.5", "\"value\":1e400")), f + ":1: malformed JSON line (number overflow parsing '1e400')");
  EXPECT_EQ(error(with("\"k\":8", "\"k\":8.5")), f + ":1: field 'k' must be an integer, not 8.5");
  EXPECT_EQ(error(with("\"seed\":1", "\"seed\":1e300")), f + ":1: field 'seed' must be an integer, not 1e+300");
  EXPECT_EQ(error(with("\"pretrain_max_len\":128", "\"pretrain_max_len\":9223372036854775808")),
            f + ":1: field 'pretrain_max_len' must be an integer, not 9223372036854775808");
  EXPECT_EQ(error(with("\"k\":8", "\"k\":\"8\"")), f + ":1: field 'k' has the wrong type");
  // 8.0 is an integer written as a float: read as 8.
  EXPECT_EQ(read_results(with("\"k\":8", "\"k\":8.0")).at(0).k, 8);
  // A value outside its metric's range (a percentage here) is refused; the ends are allowed.
  EXPECT_EQ(error(with("\"value\":70.5", "\"value\":-3.5")), f + ":1: field 'value' -3.5 is outside [0, 100], the range of f1");
  EXPECT_EQ(error(with("\"value\":70.5", "\"value\":100.5")), f + ":1: field 'value' 100.5 is outside [0, 100], the range of f1");
  EXPECT_EQ(read_results(with("\"value\":70.5", "\"value\":100")).at(0).value, 100.0);
  EXPECT_EQ(read_results(with("\"value\":70.5", "\"value\":0")).at(0).value, 0.0);
  // SQuAD 2.0's per-kind scores too; correlations are signed; a threshold is any real number.
  EXPECT_EQ(error(with_metric("HasAns_f1", "-5")), f + ":1: field 'value' -5.0 is outside [0, 100], the range of HasAns_f1");
  EXPECT_EQ(read_results(with_metric("mcc", "-20")).at(0).value, -20.0);
  EXPECT_EQ(error(with_metric("mcc", "-120")),
            f + ":1: field 'value' -120.0 is outside [-100, 100], the range of mcc");
  EXPECT_EQ(read_results(with_metric("best_f1_thresh", "-7")).at(0).value, -7.0);
  rpe::test::remove_tree(dir);
}

TEST(Tables, JsonMirrorsCsvRows) {
  std::vector<ResultRow> rows;
  for (int seed = 1; seed <= 2; ++seed)  // EM 74, 78: mean 76, sample std sqrt(8)
    rows.push_back(squad_row("ft/seed" + std::to_string(seed), "absolute", 0, 128, seed, "exact", 70.0 + 4 * seed,
                             "runs/tiny_absolute"));
  const auto t = render_tables(rows, {"2"});
  // One object per CSV row: EM with the values, F1 without any (mean/std null, n 0), then the
  // paper's reference row (Devlin et al.'s BERT, its published numbers only).
  ASSERT_EQ(t.json.size(), 4u) << t.json.dump();
  const auto& em = t.json[0];
  EXPECT_EQ(em["table"], "Table 2");
  EXPECT_EQ(em["column"], "EM");
  EXPECT_TRUE(em["k"].is_null());  // absolute: no clipping distance, empty in the CSV
  EXPECT_EQ(em["pretrain_run"], "tiny_absolute");
  EXPECT_DOUBLE_EQ(em["mean"].get<double>(), 76.0);
  EXPECT_NEAR(em["std"].get<double>(), std::sqrt(8.0), 1e-12);
  EXPECT_EQ(em["n"], 2);
  EXPECT_DOUBLE_EQ(em["paper"].get<double>(), 81.58);
  EXPECT_EQ(t.json[1]["column"], "F1");
  EXPECT_TRUE(t.json[1]["mean"].is_null());
  EXPECT_EQ(t.json[1]["n"], 0);
  EXPECT_DOUBLE_EQ(t.json[1]["paper"].get<double>(), 88.59);
  EXPECT_EQ(t.json[2]["method"], "BERT (Devlin et al., published)");
  EXPECT_EQ(t.json[2].size(), em.size());  // the same keys
  EXPECT_TRUE(t.json[2]["mean"].is_null());
  EXPECT_TRUE(t.json[2]["pretrain_max_len"].is_null());
  EXPECT_DOUBLE_EQ(t.json[2]["paper"].get<double>(), 80.8);
  EXPECT_DOUBLE_EQ(t.json[3]["paper"].get<double>(), 88.5);
}

// Tables 2 and 3 end with the paper's "BERT (Devlin et al.)" row, its published numbers beside
// no result of ours (Table 3: the five GLUE columns the paper has); no rows, no reference row.
TEST(Tables, ThePapersBertReferenceRowsAfterOurs) {
  auto glue = squad_row("g/seed1", "m4", 0, 128, 1, "accuracy", 84.0);
  glue.task = "mnli";
  glue.split = "dev_matched";
  const auto t = render_tables({squad_row("s/seed1", "m4", 0, 128, 1, "exact", 80.0), glue}, {"2", "3"});
  EXPECT_NE(t.markdown.find("| BERT (Devlin et al., published) | — | — | — | — | — | 80.80 | — | 88.50 |\n\n## Table 3"),
            std::string::npos)
      << t.markdown;
  EXPECT_NE(t.markdown.find("| BERT (Devlin et al., published; GLUE test) | — | — | — | — | — | 84.60 | — | 83.40 | — | 71.20 | — "
                            "| 93.50 | — | 88.90 |\n"),
            std::string::npos)
      << t.markdown;
  EXPECT_NE(t.csv.find("Table 2,\"BERT (Devlin et al., published)\",,,,,EM,,,0,80.80,\n"), std::string::npos) << t.csv;
  EXPECT_EQ(render_tables({glue}, {"2"}).markdown.find("Devlin"), std::string::npos);
}

// Table 3 shows the paper's five GLUE columns and the tasks some run fine-tuned, not a pair of
// dash columns for each GLUE task no run has (CoLA, STS-B, QNLI, WNLI here).
TEST(Tables, GlueColumnsAreThePapersAndThoseWithResults) {
  auto rte = squad_row("g/seed1", "m4", 0, 128, 1, "accuracy", 66.0);
  rte.task = "rte";
  const auto t = render_tables({rte}, {"3"});
  EXPECT_NE(t.markdown.find("| method | k | pretrain len | fine-tune len | pretrain run | MNLI-m | MNLI-m (paper) | MNLI-mm "
                            "| MNLI-mm (paper) | QQP F1 | QQP F1 (paper) | SST-2 | SST-2 (paper) | MRPC F1 | MRPC F1 (paper) "
                            "| RTE | RTE (paper) |\n"),
            std::string::npos)
      << t.markdown;
  EXPECT_NE(t.markdown.find("| 66.00 | — |\n"), std::string::npos) << t.markdown;
  for (const char* absent : {"CoLA", "STS-B", "QNLI", "WNLI"})
    EXPECT_EQ(t.csv.find(absent), std::string::npos) << absent << "\n" << t.csv;
  EXPECT_EQ(t.json.size(), 2u * 6u);  // m4's row and the reference row, six columns each
}

// Values of any size print whole (a 32-byte buffer cut 1e30 to its first 31 digits, found by
// adversarial testing), and names holding '|' or a line break stay inside their Markdown cell.
TEST(Tables, LargeValuesPrintWholeAndNamesStayInTheirCells) {
  auto big = squad_row("s/seed1", "m4", 0, 128, 1, "exact", 1e30);
  const auto t = render_tables({big}, {"2"});
  EXPECT_NE(t.csv.find(",1000000000000000019884624838656.00,"), std::string::npos) << t.csv;
  EXPECT_NE(t.markdown.find("| 1000000000000000019884624838656.00 |"), std::string::npos) << t.markdown;
  auto odd = squad_row("s/seed1", "m4 | x\ny", 0, 128, 1, "exact", 50.0);
  const auto u = render_tables({odd}, {"2"});
  EXPECT_NE(u.markdown.find("| m4 \\| x y | "), std::string::npos) << u.markdown;
  EXPECT_EQ(u.markdown.find("\ny |"), std::string::npos) << u.markdown;
}

// `finetune --overwrite` deletes the old run's seeds, but their lines stay in every results file
// they were appended to: Table 2 showed "(n=2)" pooling the new run's seed 1 with the deleted
// run's seed 2. Each line carries when its folder was made (run_started); the tables keep, per
// run folder, the lines of its newest run only, and say what they left out.
TEST(Tables, ARunReplacedByOverwriteNoLongerCounts) {
  std::vector<ResultRow> rows;
  for (int seed = 1; seed <= 2; ++seed) {  // the first run: seeds 1 and 2
    auto r = squad_row("ft/seed" + std::to_string(seed), "m4", 127, 128, seed, "exact", 70.0 + seed);
    r.run_dir = "/w/ft";
    r.run_started = "2026-01-01T00:00:00.000000001Z";
    rows.push_back(r);
  }
  auto again = rows[0];  // the same folder --overwrite: seed 1 only, another learning rate
  again.value = 60.0;
  again.run_started = "2026-01-01T00:00:00.000000002Z";
  rows.push_back(again);
  auto other = rows[1];  // seed 2 of another folder of the same name: not replaced by it
  other.run_dir = "/elsewhere/ft";
  other.run_started = "2025-01-01T00:00:00.000000000Z";
  auto old = rows[1];  // a line of before the field: kept, nothing can tell
  old.run_started.clear();
  old.run_dir.clear();
  std::vector<std::string> notes;
  const auto kept = current_rows({rows[0], rows[1], again, other, old}, notes);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_DOUBLE_EQ(kept[0].value, 60.0);
  EXPECT_EQ(kept[1].run_dir, "/elsewhere/ft");
  EXPECT_TRUE(kept[2].run_dir.empty());
  EXPECT_EQ(notes, std::vector<std::string>{"left out: 2 result line(s) of the run started 2026-01-01T00:00:00.000000001Z in "
                                            "/w/ft, replaced there by the run started 2026-01-01T00:00:00.000000002Z "
                                            "(--overwrite)"});
  const auto t = render_tables(rows, {"2"});
  EXPECT_NE(t.csv.find("Table 2,m4,127,128,128,pre,EM,60.00,,1,83.63"), std::string::npos) << t.csv;
  EXPECT_NE(t.markdown.find("Results of runs replaced in their folders, not shown:\n- " + notes[0]), std::string::npos)
      << t.markdown;
  EXPECT_EQ(rpe::test::notes_but_lineage(table5(rows, {128}).notes), notes);  // the extra tables too
  // The field survives the result line; lines without it read as of before it.
  auto j = to_json(again);
  EXPECT_EQ(result_from_json(j, "x").run_started, again.run_started);
  j.erase("run_started");
  EXPECT_TRUE(result_from_json(j, "x").run_started.empty());
  EXPECT_FALSE(to_json(old).contains("run_started"));
}

// A line with a run_dir but no run_started (a build of between the two fields) in a folder that
// dated lines also name is of a run that the dated one replaced: every run since records when
// it started, and a folder is made again only by --overwrite. It was kept, and Table 2 pooled the
// deleted run's seed 2 with the new run's seed 1 (66.00 ± 8.49, n=2). Undated lines of a folder
// no dated run wrote, or without a folder, stay: nothing says they were replaced.
TEST(Tables, UndatedLinesOfAFolderADatedRunReplacedNoLongerCount) {
  auto undated = squad_row("ft/seed2", "m4", 127, 128, 2, "exact", 72.0);
  undated.run_dir = "/w/ft";
  auto dated = squad_row("ft/seed1", "m4", 127, 128, 1, "exact", 60.0);
  dated.run_dir = "/w/ft";
  dated.run_started = "2026-01-01T00:00:00.000000002Z";
  auto alone = squad_row("other/seed1", "m4", 127, 128, 1, "exact", 50.0);  // undated, its folder's only run
  alone.run_dir = "/w/other";
  auto no_folder = squad_row("ft/seed3", "m4", 127, 128, 3, "exact", 40.0);  // of before run_dir too
  std::vector<std::string> notes;
  const auto kept = current_rows({undated, dated, alone, no_folder}, notes);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_DOUBLE_EQ(kept[0].value, 60.0);
  EXPECT_EQ(kept[1].run_dir, "/w/other");
  EXPECT_DOUBLE_EQ(kept[2].value, 40.0);
  EXPECT_EQ(notes, std::vector<std::string>{"left out: 1 result line(s) of a run of before run_started in /w/ft, "
                                            "replaced there by the run started 2026-01-01T00:00:00.000000002Z "
                                            "(--overwrite)"});
  const auto t = render_tables({undated, dated}, {"2"});
  EXPECT_NE(t.csv.find("Table 2,m4,127,128,128,pre,EM,60.00,,1,83.63"), std::string::npos) << t.csv;
  EXPECT_EQ(rpe::test::notes_but_lineage(table5({undated, dated}, {128}).notes), std::vector<std::string>{notes[0]});  // the extra tables too
}

// Seeds of fine-tuning runs of other names (another learning rate) were pooled in one cell:
// `finetune glue --task mrpc` and the same into --run-dir runs/glue_lr with another lr made
// "MRPC (n=2)". A row is one fine-tuning experiment, by finetune_run_name: the run folder's name
// without "_s<seed>" and, for GLUE, without "_<task>" (the reproduction scripts' m4_mrpc_s1,
// m4_mrpc_s2, m4_rte_s1 are one row), a GLUE default folder <run.name>/<task> named by run.name.
TEST(Tables, SeedsOfDifferentFineTuningRunsAreNotPooled) {
  auto glue = [](const std::string& run_id, const std::string& run_dir, const std::string& task, int64_t seed, double value) {
    auto r = squad_row(run_id, "m4", 0, 128, seed, task == "mrpc" ? "f1" : "accuracy", value);
    r.task = task;
    r.run_dir = run_dir;
    return r;
  };
  // The audit's case: the default folder runs/glue/mrpc, and runs/glue_lr.
  const auto a = glue("mrpc/seed1", "/w/runs/glue/mrpc", "mrpc", 1, 80.0), b = glue("glue_lr/seed1", "/w/runs/glue_lr", "mrpc", 1, 70.0);
  EXPECT_EQ(finetune_run_name(a), "glue");
  EXPECT_EQ(finetune_run_name(b), "glue_lr");
  const auto t = render_tables({a, b}, {"3"});
  EXPECT_NE(t.csv.find("Table 3,m4 (fine-tuning run glue),,128,128,pre,MRPC F1,80.00,,1,"), std::string::npos) << t.csv;
  EXPECT_NE(t.csv.find("Table 3,m4 (fine-tuning run glue_lr),,128,128,pre,MRPC F1,70.00,,1,"), std::string::npos) << t.csv;
  EXPECT_EQ(t.markdown.find("(n=2)"), std::string::npos) << t.markdown;
  // Two default folders <run.name>/mrpc share the run id mrpc/seed1, but are two rows: no "the
  // tables keep the later line" note for them.
  const auto lr3 = glue("mrpc/seed1", "/w/runs/lr3/mrpc", "mrpc", 1, 80.0), lr5 = glue("mrpc/seed1", "/w/runs/lr5/mrpc", "mrpc", 1, 70.0);
  EXPECT_TRUE(run_id_clashes({lr3, lr5}).empty());
  EXPECT_NE(render_tables({lr3, lr5}, {"3"}).csv.find("Table 3,m4 (fine-tuning run lr5),,128,128,pre,MRPC F1,70.00,,1,"),
            std::string::npos);
  // The reproduction's layout: a folder per seed and task, one experiment: one row, seeds pooled,
  // named by nothing but its method (no other row is alike).
  std::vector<ResultRow> rows;
  for (int seed = 1; seed <= 2; ++seed) {
    const std::string s = std::to_string(seed);
    rows.push_back(glue("m4_mrpc_s" + s + "/seed" + s, "/o/finetune/table3/m4_mrpc_s" + s, "mrpc", seed, 80.0 + 2 * seed));
    rows.push_back(glue("m4_rte_s" + s + "/seed" + s, "/o/finetune/table3/m4_rte_s" + s, "rte", seed, 60.0));
  }
  EXPECT_EQ(finetune_run_name(rows[0]), "m4");
  EXPECT_EQ(finetune_run_name(rows[1]), "m4");
  const auto r = render_tables(rows, {"3"});
  EXPECT_NE(r.csv.find("Table 3,m4,,128,128,pre,MRPC F1,83.00,1.41,2,"), std::string::npos) << r.csv;
  EXPECT_NE(r.csv.find("Table 3,m4,,128,128,pre,RTE,60.00,0.00,2,"), std::string::npos) << r.csv;
  for (const auto& j : r.json)
    if (j["method"] == "m4") {
      EXPECT_EQ(j["finetune_run"], "m4");
    }
  // SQuAD the same: m4_s1 and m4_s2 pool, m4_lr is another row (Tables 2-4 and the extra tables).
  const auto s1 = squad_row("m4_s1/seed1", "m4", 127, 128, 1, "f1", 80.0), s2 = squad_row("m4_s2/seed2", "m4", 127, 128, 2, "f1", 82.0),
             lr = squad_row("m4_lr_s1/seed1", "m4", 127, 128, 1, "f1", 50.0);
  const auto q = render_tables({s1, s2, lr}, {"2"});
  EXPECT_NE(q.csv.find("Table 2,m4 (fine-tuning run m4),127,128,128,pre,F1,81.00,1.41,2,"), std::string::npos) << q.csv;
  EXPECT_NE(q.csv.find("Table 2,m4 (fine-tuning run m4_lr),127,128,128,pre,F1,50.00,,1,"), std::string::npos) << q.csv;
  EXPECT_EQ(table5({s1, s2, lr}, {128}).rows.size(), 3u);  // the paper's reference row, then m4 and m4_lr
}

// Lines named the pretraining run by its folder only (--init runs/p2): seeds fine-tuned from its
// step 400, and from step 420 after a resumed pretraining went on, pooled in one cell. Lines
// carry the checkpoint loaded; a run fine-tuned from two of them is two rows, each named.
TEST(Tables, TwoCheckpointsOfOnePretrainingRunAreTwoRows) {
  auto at = [](int64_t seed, const std::string& checkpoint, double value) {
    auto r = squad_row("ft_s" + std::to_string(seed) + "/seed" + std::to_string(seed), "m4", 127, 128, seed, "f1", value, "runs/p2");
    r.pretrain_checkpoint = checkpoint;
    return r;
  };
  const auto a = at(1, "step_00000400.pt", 80.0), b = at(2, "step_00000400.pt", 82.0), c = at(3, "step_00000420.pt", 60.0);
  const auto t = render_tables({a, b, c}, {"2"});
  EXPECT_NE(t.csv.find("Table 2,m4,127,128,128,p2/step_00000400.pt,F1,81.00,1.41,2,90.53"), std::string::npos) << t.csv;
  EXPECT_NE(t.csv.find("Table 2,m4,127,128,128,p2/step_00000420.pt,F1,60.00,,1,90.53"), std::string::npos) << t.csv;
  // One checkpoint: the run's name alone, as before. A line of before the field (a reproduction
  // half run by an older build) joins the run's one named checkpoint, and is told apart beside two.
  EXPECT_NE(render_tables({a, b}, {"2"}).csv.find("Table 2,m4,127,128,128,p2,F1,81.00,1.41,2,"), std::string::npos);
  auto old = c;
  old.pretrain_checkpoint.clear();
  EXPECT_NE(render_tables({a, old}, {"2"}).csv.find(",p2,F1,70.00,14.14,2,"), std::string::npos) << render_tables({a, old}, {"2"}).csv;
  EXPECT_NE(render_tables({a, c, old}, {"2"}).csv.find(",p2/?,F1,60.00,,1,"), std::string::npos);
  // The field survives the result line; absent where empty.
  EXPECT_EQ(result_from_json(to_json(c), "x").pretrain_checkpoint, "step_00000420.pt");
  EXPECT_FALSE(to_json(old).contains("pretrain_checkpoint"));
}
