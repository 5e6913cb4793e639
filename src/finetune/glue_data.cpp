// GLUE TSV reader and pair encoding (see glue_data.h).
#include "finetune/glue_data.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "data/corpus.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/input_file.h"

namespace rpe::finetune {
namespace fs = std::filesystem;

namespace {
// Column layouts of the GLUE release files (train/dev; the label is the last or a fixed field).
const std::vector<GlueTask>& glue_tasks() {
  static const std::vector<GlueTask> tasks = {
      {"cola", "CoLA", false, 4, 3, -1, 1, {"0", "1"}, {"dev"}, {"sentence"}, {"question"}},
      {"sst2", "SST-2", true, 2, 0, -1, 1, {"0", "1"}, {"dev"}, {"sentence"}, {"question"}},
      {"mrpc", "MRPC", true, 5, 3, 4, 0, {"0", "1"}, {"dev"}, {"#1 String", "#2 String"}, {}},
      {"stsb", "STS-B", true, 10, 7, 8, 9, {}, {"dev"}, {"sentence1", "sentence2"}, {"pairID"}},
      {"qqp", "QQP", true, 6, 3, 4, 5, {"0", "1"}, {"dev"}, {"question1", "question2"}, {}},
      {"mnli", "MNLI", true, 12, 8, 9, 11, {"contradiction", "entailment", "neutral"}, {"dev_matched", "dev_mismatched"},
       {"sentence1", "sentence2"}, {"filename"}},
      {"qnli", "QNLI", true, 4, 1, 2, 3, {"entailment", "not_entailment"}, {"dev"}, {"question", "sentence"}, {}},
      {"rte", "RTE", true, 4, 1, 2, 3, {"entailment", "not_entailment"}, {"dev"}, {"sentence1", "sentence2"}, {"genre"}},
      {"wnli", "WNLI", true, 4, 1, 2, 3, {"0", "1"}, {"dev"}, {"sentence1", "sentence2"}, {"genre"}},
  };
  return tasks;
}
}  // namespace

std::vector<std::string> glue_task_names() {
  std::vector<std::string> names;
  for (const auto& t : glue_tasks()) names.push_back(t.name);
  return names;
}

const GlueTask& glue_task(const std::string& name) {
  for (const auto& t : glue_tasks())
    if (t.name == name) return t;
  throw UserError("finetune.task: '" + name + "' is not a GLUE task (valid: " + join(glue_task_names()) + ")");
}

namespace {
constexpr double kStsbMinScore = 0.0, kStsbMaxScore = 5.0;

std::vector<std::string> split_tab(const std::string& line) {
  std::vector<std::string> out;
  size_t i = 0;
  while (true) {
    const size_t j = line.find('\t', i);
    out.push_back(line.substr(i, j == std::string::npos ? std::string::npos : j - i));
    if (j == std::string::npos) break;
    i = j + 1;
  }
  return out;
}

// Whether `field` is a label of `task`: one of its class names, or an STS-B score.
bool is_label(const std::string& field, const GlueTask& task) {
  if (!task.labels.empty()) return std::find(task.labels.begin(), task.labels.end(), field) != task.labels.end();
  char* end = nullptr;
  std::strtod(field.c_str(), &end);
  return !field.empty() && *end == '\0';
}
}  // namespace

std::vector<GlueExample> read_glue_tsv(const fs::path& file, const GlueTask& task) {
  std::error_code ec;
  if (!input_exists(file)) throw UserError(file.string() + ": file not found");
  if (fs::is_directory(file, ec)) throw UserError(file.string() + ": is a folder, not a GLUE .tsv file");
  const std::string text = read_file(file);
  std::vector<GlueExample> out;
  size_t pos = 0;
  int64_t line_no = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();  // CoLA dev has no final newline
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_no == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // MRPC's BOM
    if (line_no == 1 && task.header) {
      // GLUE's files of this task open with a header; a first line whose label field reads as
      // a label is an example of a file written without one, which skipping would lose.
      const auto fields = split_tab(line);
      const int64_t at = task.name == "mnli" ? static_cast<int64_t>(fields.size()) - 1 : task.label;
      if (at >= 0 && at < static_cast<int64_t>(fields.size()) && is_label(fields[at], task))
        throw UserError(file.string() + ":1: a labelled example where the header line of " + task.name +
                        " files is expected (GLUE's files have one; add it, or the first example is lost)");
      continue;
    }
    if (line.empty()) continue;
    const std::string where = file.string() + ":" + std::to_string(line_no);
    // Text goes to the tokenizer as UTF-8 (SQuAD JSON and corpora are checked the same way).
    if (const size_t bad = find_invalid_utf8(line); bad != std::string::npos)
      throw UserError(where + ": invalid UTF-8 at byte " + std::to_string(bad + 1) + " of the line");
    const auto fields = split_tab(line);
    // MNLI/QQP files carry extra annotator columns; the label is then the last field.
    const bool last_label = task.name == "mnli";
    if (static_cast<int64_t>(fields.size()) < task.columns || (!last_label && static_cast<int64_t>(fields.size()) != task.columns))
      throw UserError(where + ": expected " + std::to_string(task.columns) + " tab-separated fields, got " +
                      std::to_string(fields.size()));
    GlueExample ex;
    ex.a = fields[task.text_a];
    if (task.text_b >= 0) ex.b = fields[task.text_b];
    const std::string& label = last_label ? fields.back() : fields[task.label];
    if (task.labels.empty()) {
      // STS-B similarity scores lie in [0, 5]; nan, inf or 1e999 would make the loss NaN.
      char* end = nullptr;
      ex.label = std::strtod(label.c_str(), &end);
      if (label.empty() || *end != '\0') throw UserError(where + ": score '" + label + "' is not a number");
      if (!std::isfinite(ex.label) || ex.label < kStsbMinScore || ex.label > kStsbMaxScore)
        throw UserError(where + ": score '" + label + "' is outside [0, 5]");
    } else {
      auto it = std::find(task.labels.begin(), task.labels.end(), label);
      if (it == task.labels.end())
        throw UserError(where + ": unknown label '" + label + "' (valid: " + join(task.labels) + ")" +
                        (line_no == 1 && !task.header ? "; a header line? " + task.name +
                                                            "'s files have none: is this another task's file?"
                                                      : std::string()));
      ex.label = static_cast<double>(it - task.labels.begin());
    }
    out.push_back(std::move(ex));
  }
  if (out.empty()) throw UserError(file.string() + ": no examples");
  return out;
}

namespace {
// The first header field named like one of `names`, or -1.
int64_t column_named(const std::vector<std::string>& header, std::initializer_list<const char*> names, int64_t skip = -1) {
  for (const char* name : names)
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] == name && static_cast<int64_t>(i) != skip) return static_cast<int64_t>(i);
  return -1;
}
}  // namespace

GlueInputs read_glue_inputs(const fs::path& file, const GlueTask& task) {
  std::error_code ec;
  if (!input_exists(file)) throw UserError(file.string() + ": file not found");
  if (fs::is_directory(file, ec)) throw UserError(file.string() + ": is a folder, not a GLUE .tsv file");
  const std::string text = read_file(file);
  std::string first = text.substr(0, text.find('\n'));
  if (!first.empty() && first.back() == '\r') first.pop_back();
  if (first.rfind("\xEF\xBB\xBF", 0) == 0) first.erase(0, 3);
  const auto header = split_tab(first);
  // CoLA's train/dev have no header; a test file's starts with its index column
  const bool headerless = !task.header && header.front() != "index" && header.front() != "id";
  const bool has_label = column_named(header, {"label", "gold_label", "is_duplicate", "Quality", "score"}) >= 0;
  GlueInputs out;
  if (headerless || has_label) {
    out.examples = read_glue_tsv(file, task);
    out.labelled = true;
    return out;
  }
  auto position = [&](const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    return it == header.end() ? int64_t{-1} : static_cast<int64_t>(it - header.begin());
  };
  const int64_t idx = column_named(header, {"index", "id"});
  const int64_t a = position(task.test_text.at(0));
  const int64_t b = task.test_text.size() > 1 ? position(task.test_text[1]) : -1;
  const bool foreign = std::any_of(task.foreign.begin(), task.foreign.end(), [&](const auto& c) { return position(c) >= 0; });
  if (idx < 0 || a < 0 || (task.test_text.size() > 1 && b < 0) || foreign)
    throw UserError(file.string() + ":1: header '" + excerpt(first) + "' has no label column and is not an unlabelled " +
                    task.name + " file (columns index, " + join(task.test_text) +
                    (task.foreign.empty() ? "" : ", no " + join(task.foreign)) + "): another task's test file?");
  size_t pos = text.find('\n') == std::string::npos ? text.size() : text.find('\n') + 1;
  int64_t line_no = 1;
  std::set<std::string> indices;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::string where = file.string() + ":" + std::to_string(line_no);
    if (const size_t bad = find_invalid_utf8(line); bad != std::string::npos)
      throw UserError(where + ": invalid UTF-8 at byte " + std::to_string(bad + 1) + " of the line");
    const auto fields = split_tab(line);
    if (fields.size() != header.size())
      throw UserError(where + ": expected " + std::to_string(header.size()) + " tab-separated fields (as the header), got " +
                      std::to_string(fields.size()));
    GlueExample ex;
    ex.a = fields[a];
    if (b >= 0) ex.b = fields[b];
    // The submission's rows are matched by index: an empty or repeated one would be scored wrong.
    if (fields[idx].empty()) throw UserError(where + ": empty " + header[idx]);
    if (!indices.insert(fields[idx]).second)
      throw UserError(where + ": " + header[idx] + " " + excerpt(fields[idx]) + " appears on an earlier line");
    out.examples.push_back(std::move(ex));
    out.index.push_back(fields[idx]);
  }
  if (out.examples.empty()) throw UserError(file.string() + ": no examples");
  return out;
}

std::vector<int64_t> encode_pair(const Tokenizer& tok, const std::string& a, const std::string& b, bool pair,
                                 int64_t max_len) {
  auto ia = tok.encode(a).ids;
  std::vector<int32_t> ib;
  if (pair && !b.empty()) ib = tok.encode(b).ids;
  const int64_t budget = max_len - (pair ? 3 : 2);
  while (static_cast<int64_t>(ia.size() + ib.size()) > budget) {  // drop from the longer side
    if (ia.size() > ib.size()) ia.pop_back();
    else ib.pop_back();
  }
  const auto& sp = tok.special();
  std::vector<int64_t> ids{sp.cls};
  ids.insert(ids.end(), ia.begin(), ia.end());
  ids.push_back(sp.sep);
  if (pair) {  // an empty second text still gets its [SEP] (token type 1), as in BERT and HF
    ids.insert(ids.end(), ib.begin(), ib.end());
    ids.push_back(sp.sep);
  }
  return ids;
}

}  // namespace rpe::finetune
