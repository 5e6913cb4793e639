// GLUE TSV reading: the project's samples (all nine layouts) and, when present, the real
// dev sets with their published example counts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "finetune/glue_data.h"
#include "util/errors.h"

using namespace rpe;
using namespace rpe::finetune;
namespace fs = std::filesystem;

TEST(GlueData, ReadsAllNineSampleTasks) {
  const std::string root = std::string(RPE_SOURCE_DIR) + "/data/sample/glue/";
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

TEST(GlueData, RealDevSetsHaveTheirPublishedSizes) {
  const std::string root = std::string(RPE_SOURCE_DIR) + "/../shared/data/glue/";
  if (!fs::exists(root)) GTEST_SKIP() << "no shared GLUE data";
  const std::vector<std::tuple<std::string, std::string, size_t>> dev = {
      {"cola", "CoLA", 1043}, {"sst2", "SST-2", 872}, {"mrpc", "MRPC", 408}, {"stsb", "STS-B", 1500},
      {"qnli", "QNLI", 5463}, {"rte", "RTE", 277},    {"wnli", "WNLI", 71}};
  for (const auto& [name, folder, n] : dev) {
    const auto ex = read_glue_tsv(root + folder + "/dev.tsv", glue_task(name));
    EXPECT_EQ(ex.size(), n) << name;
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
