// Each pretraining run's name in the tables (see pretrain_labels.h).
#include "eval/pretrain_labels.h"

#include <algorithm>
#include <iterator>
#include <set>

namespace rpe::eval {

namespace {

// As the tables name it: the run folder's name ("<run>/<file>" for a checkpoint file) with
// `depth` of the folders above it ("lrA/base_m4").
std::string pretrain_label(const std::filesystem::path& id, size_t depth) {
  const bool file = id.parent_path().filename() == "checkpoints";
  std::filesystem::path run = file ? id.parent_path().parent_path() : id;
  std::filesystem::path label = file ? run.filename() / id.filename() : run.filename();
  for (auto up = run.parent_path(); depth > 0 && up.has_filename(); --depth, up = up.parent_path())
    label = up.filename() / label;
  return label.string();
}

}  // namespace

// Each pretraining run's label: its name, or, where two runs of one name appear (runs/lrA/base_m4
// and runs/lrB/base_m4), as many folders above it as tell them apart: a row pools the seeds of
// one model only.
std::map<std::filesystem::path, std::string> pretrain_labels(const std::vector<ResultRow>& rows) {
  std::set<std::filesystem::path> ids;
  for (const auto& r : rows) ids.insert(pretrain_identity(r.pretrain_run));
  std::map<std::filesystem::path, std::string> labels;
  for (const auto& id : ids) {
    const size_t deepest = static_cast<size_t>(std::distance(id.begin(), id.end()));
    for (size_t depth = 0;; ++depth) {
      const std::string label = pretrain_label(id, depth);
      const bool shared = std::any_of(ids.begin(), ids.end(),
                                      [&](const auto& other) { return other != id && pretrain_label(other, depth) == label; });
      if (!shared || depth >= deepest) {
        labels[id] = shared ? id.string() : label;
        break;
      }
    }
  }
  return labels;
}

std::vector<std::string> pretrained_model_labels(const std::vector<ResultRow>& rows) {
  const auto labels = pretrain_labels(rows);
  // A run's checkpoints fine-tuned from: two (--init of its folder before and after a resumed
  // pretraining went on) are two models, two rows named; a line of before the field joins one alone.
  std::map<std::filesystem::path, std::set<std::string>> steps;
  for (const auto& r : rows)
    if (!r.pretrain_checkpoint.empty()) steps[pretrain_identity(r.pretrain_run)].insert(r.pretrain_checkpoint);
  std::vector<std::string> out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    const auto id = pretrain_identity(r.pretrain_run);
    const std::string step = steps[id].size() > 1 ? "/" + (r.pretrain_checkpoint.empty() ? "?" : r.pretrain_checkpoint) : "";
    out.push_back(labels.at(id) + step);
  }
  return out;
}

}  // namespace rpe::eval
