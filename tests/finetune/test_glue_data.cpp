// GLUE TSV reading: the project's samples (all nine layouts) and, when present, the real
// dev sets with their published example counts; pair encoding.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "config/config.h"
#include "data/data_test_util.h"
#include "data/wordpiece_tokenizer.h"
#include "eval/dev_sizes.h"
#include "finetune/glue_data.h"
#include "util/errors.h"
#include "test_paths.h"

using namespace rpe;
using namespace rpe::finetune;
namespace fs = std::filesystem;

TEST(GlueData, ReadsAllNineSampleTasks) {
  const std::string root = rpe::test::source_dir() + "/data/sample/glue/";
  const std::vector<std::pair<std::string, std::string>> tasks = {
      {"cola", "CoLA"}, {"sst2", "SST-2"}, {"mrpc", "MRPC"}, {"stsb", "STS-B"}, {"qqp", "QQP"},
      {"mnli", "MNLI"}, {"qnli", "QNLI"},  {"rte", "RTE"},   {"wnli", "WNLI"}};
  for (const auto& [name, folder] : tasks) {
    const auto& t = glue_task(name);
    EXPECT_EQ(read_glue_tsv(root + folder + "/train.tsv", t).size(), 200u) << name;
    for (const auto& split : t.dev_splits) EXPECT_GT(read_glue_tsv(root + folder + "/" + split + ".tsv", t).size(), 0u);
  }
  const auto mnli = read_glue_tsv(root + "MNLI/dev_matched.tsv", glue_task("mnli"));  // 16 columns, gold last
  EXPECT_EQ(mnli.size(), 24u);
}

// The config's task list (validate.cpp; config cannot read finetune's table) is squad and this
// table's tasks, in its order: a task added to one and not the other fails here.
TEST(GlueData, TheConfigsTasksAreSquadAndTheTablesTasks) {
  std::vector<std::string> want{"squad"};
  for (const auto& name : glue_task_names()) want.push_back(name);
  EXPECT_EQ(finetune_task_names(), want);
  EXPECT_EQ(glue_task_names().size(), 9u);
  try {
    glue_task("squad");
    ADD_FAILURE() << "squad is no GLUE task";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("(valid: cola, sst2, mrpc, stsb, qqp, mnli, qnli, rte, wnli)"), std::string::npos)
        << e.what();
  }
}

TEST(GlueData, RealDevSetsHaveTheirPublishedSizes) {
  const std::string root = rpe::test::source_dir() + "/../shared/data/glue/";
  if (!fs::exists(root)) GTEST_SKIP() << "no shared GLUE data";
  // The sizes the tables judge a partial evaluation by (eval/dev_sizes.h), one place for both.
  const std::vector<std::tuple<std::string, std::string, int64_t>> dev = {
      {"cola", "CoLA", 1043}, {"sst2", "SST-2", 872}, {"mrpc", "MRPC", 408}, {"stsb", "STS-B", 1500},
      {"qnli", "QNLI", 5463}, {"rte", "RTE", 277},    {"wnli", "WNLI", 71}};
  for (const auto& [name, folder, n] : dev) {
    const auto ex = read_glue_tsv(root + folder + "/dev.tsv", glue_task(name));
    EXPECT_EQ(static_cast<int64_t>(ex.size()), n) << name;
    EXPECT_EQ(rpe::eval::full_dev_size(name, "dev"), n) << name;
  }
  const auto mrpc = read_glue_tsv(root + "MRPC/dev.tsv", glue_task("mrpc"));  // header with a BOM
  size_t pos = 0;
  for (const auto& e : mrpc) pos += e.label == 1.0;
  EXPECT_EQ(pos, 279u);
}

TEST(GlueData, BadLineNamesFileAndLine) {
  const auto p = fs::temp_directory_path() / "rpe_glue_bad.tsv";
  std::ofstream(p) << "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\tb\n";
  try {
    read_glue_tsv(p, glue_task("rte"));
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("rpe_glue_bad.tsv:3: expected 4 tab-separated fields, got 3"),
              std::string::npos)
        << e.what();
  }
  std::ofstream(p) << "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tmaybe\n";
  EXPECT_THROW(read_glue_tsv(p, glue_task("rte")), UserError);
}

namespace {
// The UserError message of reading `text` as `task`, or "" when it reads cleanly.
std::string glue_error(const std::string& text, const std::string& task, const std::string& name) {
  const auto p = fs::temp_directory_path() / name;
  std::ofstream(p, std::ios::binary) << text;
  try {
    read_glue_tsv(p, glue_task(task));
  } catch (const UserError& e) {
    fs::remove(p);
    return e.what();
  }
  fs::remove(p);
  return "";
}
const std::string kStsbHeader = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n";
std::string stsb_row(const std::string& score) { return "0\tg\tf\t2012\t0\tn\tn\ta cat\ta dog\t" + score + "\n"; }
}  // namespace

// A headed file of another task given to CoLA (no header) failed on its header's word as a label,
// which named no cause: the line is now suspected as a header, and the file as another task's.
TEST(GlueData, AHeaderLineWhereTheTaskHasNoneIsNamedAsSuch) {
  const std::string qnli = "index\tquestion\tsentence\tlabel\n0\twho?\tshe.\tentailment\n";
  EXPECT_NE(glue_error(qnli, "cola", "rpe_glue_cola_headed.tsv")
                .find(":1: unknown label 'question' (valid: 0, 1); a header line? cola's files have none: is this "
                      "another task's file?"),
            std::string::npos);
  // A bad label further down is only that.
  const std::string bad = glue_error("src\t1\t\ta fine sentence .\nsrc\tx\t\tanother .\n", "cola", "rpe_glue_cola_bad.tsv");
  EXPECT_NE(bad.find(":2: unknown label 'x'"), std::string::npos) << bad;
  EXPECT_EQ(bad.find("header"), std::string::npos) << bad;
}

TEST(GlueData, StsbScoresMustBeFiniteAndInZeroToFive) {
  // Scores a loss cannot use (NaN, overflowing to inf) or outside the task's scale.
  for (const std::string bad : {"nan", "NaN", "inf", "-inf", "1e999", "-0.5", "5.01", "0x1p3"}) {
    const auto err = glue_error(kStsbHeader + stsb_row("3.2") + stsb_row(bad), "stsb", "rpe_glue_stsb.tsv");
    EXPECT_NE(err.find("rpe_glue_stsb.tsv:3: score '" + bad + "'"), std::string::npos) << bad << ": " << err;
  }
  // The edges of the scale are valid.
  EXPECT_EQ(glue_error(kStsbHeader + stsb_row("0") + stsb_row("5.000"), "stsb", "rpe_glue_stsb.tsv"), "");
}

TEST(GlueData, InvalidUtf8IsRefusedNamingFileAndLine) {
  // A lone continuation byte in sentence2 of line 3, and a truncated 3-byte sequence.
  for (const std::string& bad : {std::string("ok \x80 no"), std::string("cut \xE2\x82")}) {
    const std::string text = "index\tquestion\tsentence\tlabel\n0\ta\tb\tentailment\n1\ta\t" + bad + "\tentailment\n";
    const auto err = glue_error(text, "qnli", "rpe_glue_utf8.tsv");
    EXPECT_NE(err.find("rpe_glue_utf8.tsv:3: invalid UTF-8 at byte"), std::string::npos) << err;
  }
  // Multi-byte UTF-8 (and MRPC's BOM on the header) stays valid.
  EXPECT_EQ(glue_error("\xEF\xBB\xBFQuality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tcaf\xC3\xA9\t\xE2\x82\xAC 5\n",
                       "mrpc", "rpe_glue_utf8.tsv"),
            "");
}

TEST(GlueData, FolderInsteadOfFileIsNamed) {
  const auto dir = fs::temp_directory_path() / "rpe_glue_folder.tsv";
  fs::create_directories(dir);
  try {
    read_glue_tsv(dir, glue_task("rte"));
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("rpe_glue_folder.tsv: is a folder"), std::string::npos) << e.what();
  }
  fs::remove(dir);
}

TEST(GlueData, PairTasksKeepTheSecondSepForAnEmptySecondText) {
  // Ids in tiny_vocab_lines(): [CLS] 2, [SEP] 3; "cat" and "dog" are whole words.
  const WordPieceTokenizer tok(rpe::test::write_tiny_vocab(rpe::test::temp_dir()), true);
  const auto cat = tok.encode("cat").ids, dog = tok.encode("dog").ids;
  ASSERT_EQ(cat.size(), 1u);
  ASSERT_EQ(dog.size(), 1u);
  EXPECT_EQ(encode_pair(tok, "cat", "dog", true, 16), (std::vector<int64_t>{2, cat[0], 3, dog[0], 3}));
  // A pair task's empty second text (QQP has a few): [CLS] a [SEP] [SEP], as BERT and HF encode it.
  EXPECT_EQ(encode_pair(tok, "cat", "", true, 16), (std::vector<int64_t>{2, cat[0], 3, 3}));
  EXPECT_EQ(encode_pair(tok, "cat", "", false, 16), (std::vector<int64_t>{2, cat[0], 3}));
  // The budget counts the pair's two [SEP]s: 4 slots leave one token, taken from the longer side.
  EXPECT_EQ(encode_pair(tok, "cat cat", "", true, 4), (std::vector<int64_t>{2, cat[0], 3, 3}));
}

// Unlabelled test files are told apart by their headers (GLUE's own): a model of one task given
// another task's test file is refused instead of writing a submission for it; what the headers
// cannot tell apart (RTE, WNLI and AX; CoLA and SST-2) is read.
TEST(GlueData, AnotherTasksTestFileIsRefused) {
  const std::map<std::string, std::string> headers = {
      {"cola", "index\tsentence"},
      {"mrpc", "index\t#1 ID\t#2 ID\t#1 String\t#2 String"},
      {"qnli", "index\tquestion\tsentence"},
      {"qqp", "id\tquestion1\tquestion2"},
      {"rte", "index\tsentence1\tsentence2"},
      {"stsb", "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"},
      {"mnli", "index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
               "sentence2_parse\tsentence1\tsentence2"}};
  // task -> the test files (by header) it reads; every other one is refused
  const std::map<std::string, std::set<std::string>> reads = {
      {"cola", {"cola"}}, {"sst2", {"cola"}}, {"mrpc", {"mrpc"}}, {"qnli", {"qnli"}}, {"qqp", {"qqp"}},
      {"rte", {"rte"}},   {"wnli", {"rte"}},  {"stsb", {"rte", "stsb"}}, {"mnli", {"rte", "mnli"}}};
  const auto p = fs::temp_directory_path() / "rpe_glue_test_header.tsv";
  for (const auto& [task, ok] : reads)
    for (const auto& [file, header] : headers) {
      const auto fields = std::count(header.begin(), header.end(), '\t') + 1;
      std::string row = "7";
      for (int i = 1; i < fields; ++i) row += "\ttext " + std::to_string(i);
      std::ofstream(p, std::ios::binary) << header << "\n" << row << "\n";
      std::string error;
      try {
        const auto in = read_glue_inputs(p, glue_task(task));
        EXPECT_EQ(in.index, std::vector<std::string>{"7"}) << task << " on " << file;
      } catch (const UserError& e) {
        error = e.what();
      }
      if (ok.count(file)) {
        EXPECT_EQ(error, "") << task << " on " << file;
      } else {
        EXPECT_NE(error.find("rpe_glue_test_header.tsv:1: header '"), std::string::npos) << task << " on " << file << ": " << error;
        EXPECT_NE(error.find("is not an unlabelled " + task + " file"), std::string::npos) << error;
      }
    }
  // The submission matches rows by index: an empty or a repeated one is refused by line.
  for (const auto& [rows, message] : std::vector<std::pair<std::string, std::string>>{
           {"7\ta\tb\n7\tc\td\n", "rpe_glue_test_header.tsv:3: index 7 appears on an earlier line"},
           {"\ta\tb\n", "rpe_glue_test_header.tsv:2: empty index"}}) {
    std::ofstream(p, std::ios::binary) << "index\tsentence1\tsentence2\n" << rows;
    try {
      read_glue_inputs(p, glue_task("rte"));
      FAIL() << "accepted " << rows;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
  fs::remove(p);
}
