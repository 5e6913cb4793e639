// The registry's facts about each method (model/attention/registry.h) checked against the
// methods themselves, the paper's aliases, and that no list of method names lives elsewhere
// in src/ or scripts/ (callers ask the registry or `rpe-train methods --names`).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "config/config.h"
#include "config/method_catalogue.h"
#include "model/attention/position_method.h"
#include "model/attention/registry.h"
#include "test_paths.h"
#include "util/errors.h"

using namespace rpe;
namespace fs = std::filesystem;

namespace {

ModelOptions small(const std::string& method) {
  ModelOptions m;
  m.vocab_size = 30, m.hidden = 16, m.layers = 1, m.heads = 2, m.ffn = 32, m.max_position = 12;
  m.attention.method = method;
  return m;
}

bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

TEST(Registry, FactsAgreeWithTheMethodsThemselves) {
  for (const MethodInfo& info : position_methods()) {
    SCOPED_TRACE(info.name);
    auto method = make_position_method(small(info.name));
    auto term = method->make_layer_term(0);
    const auto keys = method->option_keys();
    EXPECT_EQ(method_option_keys(info.name), keys);
    EXPECT_EQ(info.clipped, has(keys, "max_relative"));
    EXPECT_EQ(info.learned_absolute, method->absolute_table.defined());
    EXPECT_FALSE(info.summary.empty());
    // A per-distance table for Figure 4 exactly when the registry says the layout.
    if (info.distance_table != DistanceTable::none) {
      EXPECT_TRUE(term->position_weights().defined());
    }
    // HF's distance_embedding is a parameter of the layer term, by the name the entry gives.
    if (!info.hf_distance_table.empty()) {
      EXPECT_NE(term->named_parameters().find(info.hf_distance_table), nullptr);
    }
    if (!info.hf_distance_table.empty() || info.hf_type.empty()) continue;
    EXPECT_TRUE(info.learned_absolute);  // exported without a distance table: HF's absolute embeddings
  }
}

// zero_is_neutral: with every position parameter zeroed, the method's logits and value term
// are plain attention's, q k^T / sqrt(d) and nothing (additive terms); where the fact is false
// they are not: a zero gate erases the scores (m1-m3), and deberta's 1/sqrt(3d) scale stays.
TEST(Registry, ZeroIsNeutralMatchesWhatZeroedTablesCompute) {
  torch::manual_seed(3);
  const int64_t d = 8;
  const auto q = torch::randn({1, 2, 5, d}, torch::kFloat64), k = torch::randn({1, 2, 5, d}, torch::kFloat64);
  const auto plain = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));  // [1, H, L, L]
  int64_t neutral = 0, not_neutral = 0;
  for (const MethodInfo& info : position_methods()) {
    SCOPED_TRACE(info.name);
    auto method = make_position_method(small(info.name));
    auto term = method->make_layer_term(0);
    method->to(torch::kFloat64);
    term->to(torch::kFloat64);
    const auto params = method->parameters().size() + term->parameters().size();
    if (params == 0) continue;  // nothing a swap would add
    torch::NoGradGuard no_grad;
    for (auto& p : method->parameters()) p.zero_();
    for (auto& p : term->parameters()) p.zero_();
    auto input = method->input_embeddings(5);
    if (input.defined()) {
      EXPECT_EQ(input.abs().max().item<double>(), 0.0);
    }
    auto qq = q.clone(), kk = k.clone();
    term->transform_qk(qq, kk);
    auto logits = term->content_scores(qq, kk) * term->scale(d);  // as self_attention.cpp combines them
    if (auto bias = term->score_bias(qq, kk); bias.defined()) logits = logits + bias;
    auto value = term->value_term(torch::softmax(plain, -1));
    const bool same = torch::allclose(logits, plain, 1e-12, 1e-12) &&
                      (!value.defined() || value.abs().max().item<double>() == 0.0);
    EXPECT_EQ(same, info.zero_is_neutral) << "max |logit - plain| " << (logits - plain).abs().max().item<double>();
    ++(info.zero_is_neutral ? neutral : not_neutral);
  }
  EXPECT_GE(neutral, 5);      // shaw, transformer_xl, m4, t5_bias, absolute, ...
  EXPECT_GE(not_neutral, 4);  // m1, m2, m3, deberta
}

TEST(Registry, ConfigCatalogueIsTheRegistryAndPaperNamesAreAliases) {
  std::vector<std::string> catalogue;
  for (const MethodFacts* m : method_catalogue()) catalogue.push_back(m->name);
  EXPECT_EQ(catalogue, attention_method_names());
  for (int i = 1; i <= 4; ++i) {
    const std::string ours = "m" + std::to_string(i), paper = "method" + std::to_string(i);
    ASSERT_NE(find_method(paper), nullptr) << paper;
    EXPECT_EQ(find_method(paper)->name, ours);
    EXPECT_EQ(make_position_method(small(paper))->describe().substr(0, 2), ours);
    const Config c = load_config(fs::path(rpe::test::source_dir()) / "configs/pretrain/tiny_m4.yaml",
                                 {"model.attention.method=" + paper});
    EXPECT_EQ(c.model.attention.method, ours);  // stored under the registry's name
  }
  EXPECT_EQ(find_method("m9"), nullptr);
  EXPECT_THROW(method_info("m9"), UserError);
}

// The test that keeps method knowledge in one place: a line naming three or more methods
// outside src/model/attention/ is a list that the next method would have to be added to.
TEST(Registry, NoListOfMethodNamesOutsideTheRegistry) {
  std::string alternatives;
  for (const MethodInfo& m : position_methods()) {
    alternatives += (alternatives.empty() ? "" : "|") + m.name;
    for (const auto& a : m.aliases) alternatives += "|" + a;
  }
  const std::regex name("(^|[^A-Za-z0-9_])(" + alternatives + ")(?![A-Za-z0-9_])");
  // The paper's published numbers are keyed by the method they belong to: data, not a list of methods.
  const std::set<std::string> exempt{"src/eval/paper_numbers.h"};
  const fs::path root = rpe::test::source_dir();
  std::vector<std::string> found;
  for (const char* top : {"src", "scripts"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / top)) {
      if (!entry.is_regular_file()) continue;
      const std::string rel = fs::relative(entry.path(), root).string();
      const std::string ext = entry.path().extension().string();
      if (rel.rfind("src/model/attention/", 0) == 0 || exempt.count(rel)) continue;
      if (ext != ".cpp" && ext != ".h" && ext != ".sh" && ext != ".py" && ext != ".cmake" && ext != ".yaml") continue;
      std::ifstream in(entry.path());
      int line_no = 0;
      for (std::string line; std::getline(in, line);) {
        ++line_no;
        std::set<std::string> names;
        for (std::sregex_iterator it(line.begin(), line.end(), name), end; it != end; ++it) names.insert((*it)[2]);
        if (names.size() >= 3) found.push_back(rel + ":" + std::to_string(line_no) + ": " + line);
      }
    }
  }
  EXPECT_TRUE(found.empty()) << "method lists outside the registry (ask it, or `rpe-train methods --names`):\n"
                             << [&] {
                                  std::string all;
                                  for (const auto& f : found) all += f + "\n";
                                  return all;
                                }();
}
