// Tables 2-4 rendered from their cells (see table_render.h).
#include "eval/table_render.h"

#include <algorithm>
#include <set>

#include "eval/dev_sizes.h"
#include "eval/paper_numbers.h"
#include "eval/text_table.h"

namespace rpe::eval::tables_detail {

namespace {

std::string fmt(double x) { return fixed(x, 2); }
std::string cell(const std::optional<Stat>& s) {
  if (!s || s->n == 0) return "—";
  if (s->n == 1) return fmt(s->mean);
  return fmt(s->mean) + " ± " + fmt(s->std) + " (n=" + std::to_string(s->n) + ")";
}
std::string paper_text(const std::optional<double>& v) { return v ? fmt(*v) : "—"; }

// "300 of 10570" where a cell's evaluations scored part of its dev set (dev_sizes.h), else "".
// A researcher reads the paper's number beside it as the full-dev reference it is, not as a
// comparison of like with like: the cell says so in every rendering, and a note under the table.
std::string partial_text(const std::optional<Stat>& s, const Column& c) {
  return !s || s->n == 0 ? "" : dev_part_text(c.task, c.split, s->examples);
}

// k = 0: the method has no clipping distance (its registry entry is not `clipped`).
std::string k_text(int64_t k, const char* none) { return k > 0 ? std::to_string(k) : none; }

nlohmann::ordered_json json_row(const std::string& table, const GroupKey& g, const std::string& column,
                                const std::optional<Stat>& s, const std::optional<double>& paper,
                                const std::string& partial = "") {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["table"] = table;
  j["method"] = g.method;
  j["k"] = g.k > 0 ? nlohmann::ordered_json(g.k) : nlohmann::ordered_json();
  if (g.buckets > 0) j["position_buckets"] = g.buckets;
  if (!g.swapped_from.empty()) j["pretrained_method"] = g.swapped_from;
  j["pretrain_max_len"] = g.pretrain_len;
  j["finetune_max_len"] = g.finetune_len;
  j["pretrain_run"] = g.pretrain_run;
  j["select"] = g.select;
  j["finetune_run"] = g.finetune_run;
  j["column"] = column;
  j["mean"] = s ? nlohmann::ordered_json(s->mean) : nlohmann::ordered_json();
  // One seed has no sample std: null (a plot draws no error bar), as the Markdown shows the value alone.
  j["std"] = s && s->n > 1 ? nlohmann::ordered_json(s->std) : nlohmann::ordered_json();
  j["n"] = s ? s->n : 0;
  j["paper"] = paper ? nlohmann::ordered_json(*paper) : nlohmann::ordered_json();
  // The CSV's dev_examples: "300 of 10570" for a mean over part of the dev set, else null.
  j["dev_examples"] = partial.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(partial);
  return j;
}

// The columns a table shows: those with a result of ours in one of its rows or a published
// number (the paper's own columns always show, so a missing run reads as "—"). A GLUE task no
// run fine-tuned (the paper's Table 3 has five of them) would be two columns of dashes.
std::vector<size_t> shown_columns(const Table& t, const Values& v, const std::vector<GroupKey>& rows) {
  std::vector<size_t> shown;
  for (size_t i = 0; i < t.columns.size(); ++i) {
    const Column& c = t.columns[i];
    bool any = t.reference && t.reference(i);
    for (const auto& g : rows) any = any || t.paper(g, i) || v.count({g, c.task, c.split, c.metric});
    if (any) shown.push_back(i);
  }
  return shown;
}

// The paper's reference row, last, with no result of ours: that BERT is not a run of this project.
void render_reference(const Table& t, const std::vector<size_t>& shown, RenderedTables& out) {
  const std::string& label = t.reference_label;
  std::string line = "| " + label + " | — | — | — | — |";
  for (size_t i : shown) {
    const auto p = t.reference(i);
    line.append(" — | ").append(paper_text(p)).append(" |");
    out.csv += t.name + "," + csv_field(label) + ",,,,," + csv_field(t.columns[i].title) + ",,,0," + (p ? fmt(*p) : "") + ",\n";
    // The same keys as a row of ours, null where that BERT has no value of this project.
    auto j = json_row(t.name, GroupKey{label, 0, 0, 0, "", "", 0}, t.columns[i].title, std::nullopt, p);
    for (const char* key : {"pretrain_max_len", "finetune_max_len", "pretrain_run", "select", "finetune_run"}) j[key] = nullptr;
    out.json.push_back(std::move(j));
  }
  out.markdown += line + "\n";
}

}  // namespace

void render(const Table& t, const Values& v, RenderedTables& out) {
  std::set<GroupKey> groups;
  for (const auto& [key, _] : v) {
    const auto& [g, task, split, metric] = key;
    for (const auto& c : t.columns)
      if (c.task == task && c.split == split && c.metric == metric && t.keep(g)) groups.insert(g);
  }
  // Rows in the paper's order of methods (its Table 2: absolute, Shaw, methods 1-4), the methods
  // it lacks after them; within a method by k, lengths, run.
  auto paper_rank = [](const std::string& method) {
    const auto& rows = paper::kTable2;
    return std::find_if(rows.begin(), rows.end(), [&](const auto& r) { return method == r.method; }) - rows.begin();
  };
  std::vector<GroupKey> ordered(groups.begin(), groups.end());
  for (auto& g : ordered)  // rows alike but for their fine-tuning run say which they are
    g.named_run = std::count_if(groups.begin(), groups.end(), [&](const GroupKey& o) { return g.alike_but_run(o); }) > 1;
  if (t.before) std::stable_sort(ordered.begin(), ordered.end(), t.before);
  std::stable_sort(ordered.begin(), ordered.end(),
                   [&](const GroupKey& a, const GroupKey& b) { return paper_rank(a.method) < paper_rank(b.method); });
  out.markdown += "## " + t.name + "\n\n" + t.caption + "\n\n";
  if (groups.empty()) {
    out.markdown += "(no results yet)\n\n";
    return;
  }
  const std::vector<size_t> shown = shown_columns(t, v, ordered);
  std::string head = "| method | k | pretrain len | fine-tune len | pretrain run |";
  std::string rule = "|---|---|---|---|---|";
  for (size_t i : shown) {
    head += " " + t.columns[i].title + " | " + t.columns[i].title + " (paper) |";
    rule += "---|---|";
  }
  out.markdown += head + "\n" + rule + "\n";
  std::vector<std::string> left_out;
  bool any_partial = false;
  for (const auto& g : ordered) {
    // A model fine-tuned from random weights (--init none) has no pretraining length or run.
    const bool pretrained = g.pretrain_len > 0;
    const std::string run = pretrained || !g.pretrain_run.empty() ? g.pretrain_run : "(random init)";
    std::string line = "| " + markdown_cell(g.label()) + " | " + k_text(g.k, "—") + " | " +
                       (pretrained ? std::to_string(g.pretrain_len) : "—") + " | " + std::to_string(g.finetune_len) +
                       " | " + markdown_cell(run) + " |";
    for (size_t i : shown) {
      const auto s = lookup(v, g, t.columns[i], left_out);
      // The paper's numbers are of its protocol (fixed epochs, the final weights) and of models
      // pretrained with their method (Tables 2-4; a swap is Table 5's experiment).
      const auto p = papers_protocol(g.select) && pretrained && g.swapped_from.empty() ? t.paper(g, i) : std::nullopt;
      const std::string partial = partial_text(s, t.columns[i]);
      any_partial = any_partial || !partial.empty();
      const std::string ours = partial.empty() ? cell(s) : cell(s) + " (dev " + partial + ")";
      line.append(" ").append(ours).append(" | ").append(paper_text(p)).append(" |");
      out.csv += t.name + "," + csv_field(g.label()) + "," + k_text(g.k, "") + "," +
                 (pretrained ? std::to_string(g.pretrain_len) : "") + "," + std::to_string(g.finetune_len) + "," +
                 csv_field(run) + "," + csv_field(t.columns[i].title) + "," +
                 (s ? fmt(s->mean) + "," + (s->n > 1 ? fmt(s->std) : "") + "," + std::to_string(s->n) : ",,0") + "," +
                 (p ? fmt(*p) : "") + "," + partial + "\n";
      out.json.push_back(json_row(t.name, g, t.columns[i].title, s, p, partial));
    }
    out.markdown += line + "\n";
  }
  if (t.reference) render_reference(t, shown, out);
  out.markdown += "\n";
  if (any_partial)
    out.markdown += "\"(dev N of M)\": scored on N of the dev set's M examples only (finetune.max_eval_examples, "
                    "or a sample dev file); the paper's numbers beside it, where shown, are of the whole dev set, "
                    "not the same quantity.\n\n";
  if (!left_out.empty()) {
    out.markdown += "Left out of the means above, as scored on part of a dev set only:\n";
    for (const auto& note : left_out) out.markdown += "- " + note + "\n";
    out.markdown += "\n";
  }
}

}  // namespace rpe::eval::tables_detail
