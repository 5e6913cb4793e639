// Tables 2-4 from result lines (see tables.h).
#include "eval/tables.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "eval/paper_numbers.h"
#include "eval/text_table.h"
#include "util/errors.h"
#include "util/file_tree.h"

namespace rpe::eval {

Stat mean_std(const std::vector<double>& v) {
  Stat s;
  s.n = static_cast<int64_t>(v.size());
  if (v.empty()) return s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  if (v.size() > 1) {
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.std = std::sqrt(ss / static_cast<double>(v.size() - 1));
  }
  return s;
}

namespace {

struct GroupKey {
  std::string method;
  int64_t k, pretrain_len, finetune_len;
  std::string pretrain_run;
  std::string select;  // finetune.select: dev-best weights are another protocol than the final ones
  int64_t buckets;     // log buckets of distance (deberta), 0 = none: another model than the clipped one
  // finetune_run_name: seeds of fine-tuning runs of other names (another learning rate) are not
  // one cell; named in the method cell where a table has rows alike in all else (named_run).
  std::string finetune_run = "";
  bool named_run = false;
  auto tie() const { return std::tie(method, buckets, k, pretrain_len, finetune_len, pretrain_run, select, finetune_run); }
  // The method cell: its log buckets and the protocol named where it is not the paper's (fixed
  // epochs, final weights).
  std::string label() const {
    const std::string what = with_protocol(method_text(method, buckets), select);
    return named_run ? what + " (fine-tuning run " + (finetune_run.empty() ? "?" : finetune_run) + ")" : what;
  }
  bool operator<(const GroupKey& o) const { return tie() < o.tie(); }
  bool alike_but_run(const GroupKey& o) const {
    GroupKey a = *this;
    a.finetune_run = o.finetune_run;
    return !(a < o) && !(o < a);
  }
};

struct Column {
  std::string title, task, split, metric;
};

std::string fmt(double x) { return fixed(x, 2); }
std::string cell(const std::optional<Stat>& s) {
  if (!s || s->n == 0) return "—";
  if (s->n == 1) return fmt(s->mean);
  return fmt(s->mean) + " ± " + fmt(s->std) + " (n=" + std::to_string(s->n) + ")";
}
std::string paper_text(const std::optional<double>& v) { return v ? fmt(*v) : "—"; }
// The paper's Tables 2 and 3 compare the methods unclipped (its Table 4: m4 at k = 512 is Table
// 2's row): a row clipped shorter is another experiment, with no paper number beside it.
bool unclipped(const GroupKey& g) { return g.k == 0 || g.k >= g.pretrain_len - 1; }

// k = 0: the method has no clipping distance (its registry entry is not `clipped`).
std::string k_text(int64_t k, const char* none) { return k > 0 ? std::to_string(k) : none; }

// One evaluation: its value and how many dev examples it scored.
struct Scored {
  double value = 0;
  int64_t examples = 0;
};

// (group, task, split, metric) -> evaluations by "run_id#seed"; a repeated evaluation of the
// same run and seed replaces the earlier one.
using Values = std::map<std::tuple<GroupKey, std::string, std::string, std::string>, std::map<std::string, Scored>>;

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

Values collect(const std::vector<ResultRow>& rows) {
  Values v;
  const auto labels = pretrain_labels(rows);
  // A run's checkpoints fine-tuned from: two (--init of its folder before and after a resumed
  // pretraining went on) are two models, two rows named; a line of before the field joins one alone.
  std::map<std::filesystem::path, std::set<std::string>> steps;
  for (const auto& r : rows)
    if (!r.pretrain_checkpoint.empty()) steps[pretrain_identity(r.pretrain_run)].insert(r.pretrain_checkpoint);
  for (const auto& r : rows) {
    const auto id = pretrain_identity(r.pretrain_run);
    const std::string step = steps[id].size() > 1 ? "/" + (r.pretrain_checkpoint.empty() ? "?" : r.pretrain_checkpoint) : "";
    GroupKey g{r.method, r.k, r.pretrain_max_len, r.finetune_max_len, labels.at(id) + step, r.select,
               r.position_buckets, finetune_run_name(r)};
    v[{g, r.task, r.split, r.metric}][r.run_id + "#" + std::to_string(r.seed)] = {r.value, r.examples};
  }
  return v;
}

// Mean ± std of a cell over the evaluations of the whole dev set: those that scored fewer
// examples (finetune.max_eval_examples, a debugging run) are another quantity, not pooled;
// each one left out is named in `left_out`.
std::optional<Stat> lookup(const Values& v, const GroupKey& g, const Column& c, std::vector<std::string>& left_out) {
  auto it = v.find({g, c.task, c.split, c.metric});
  if (it == v.end()) return std::nullopt;
  int64_t most = 0;
  for (const auto& [_, x] : it->second) most = std::max(most, x.examples);
  std::vector<double> xs;
  for (const auto& [run, x] : it->second) {
    if (x.examples == most) {
      xs.push_back(x.value);
      continue;
    }
    const std::string note = run + " (" + c.task + " " + c.split + ": " + std::to_string(x.examples) + " of " +
                             std::to_string(most) + " examples)";
    if (std::find(left_out.begin(), left_out.end(), note) == left_out.end()) left_out.push_back(note);
  }
  return mean_std(xs);
}

nlohmann::ordered_json json_row(const std::string& table, const GroupKey& g, const std::string& column,
                                const std::optional<Stat>& s, const std::optional<double>& paper) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["table"] = table;
  j["method"] = g.method;
  j["k"] = g.k > 0 ? nlohmann::ordered_json(g.k) : nlohmann::ordered_json();
  if (g.buckets > 0) j["position_buckets"] = g.buckets;
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
  return j;
}

using PaperFn = std::function<std::optional<double>(const GroupKey&, size_t column)>;

struct Table {
  std::string name, caption;
  std::vector<Column> columns;
  PaperFn paper;  // published value for (row, column) or nullopt
  std::function<bool(const GroupKey&)> keep = [](const GroupKey&) { return true; };
  // Row order within the paper's order of methods; nullptr: by k, lengths, run.
  std::function<bool(const GroupKey&, const GroupKey&)> before = nullptr;
  // The paper's "BERT (Devlin et al.)" row for a column, published numbers only (Tables 2, 3).
  std::function<std::optional<double>(size_t column)> reference = nullptr;
  std::string reference_label = "BERT (Devlin et al., published)";
};

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
    out.csv += t.name + "," + csv_field(label) + ",,,,," + csv_field(t.columns[i].title) + ",,,0," + (p ? fmt(*p) : "") + "\n";
    // The same keys as a row of ours, null where that BERT has no value of this project.
    auto j = json_row(t.name, GroupKey{label, 0, 0, 0, "", "", 0}, t.columns[i].title, std::nullopt, p);
    for (const char* key : {"pretrain_max_len", "finetune_max_len", "pretrain_run", "select", "finetune_run"}) j[key] = nullptr;
    out.json.push_back(std::move(j));
  }
  out.markdown += line + "\n";
}

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
  for (const auto& g : ordered) {
    // A model fine-tuned from random weights (--init none) has no pretraining length or run.
    const bool pretrained = g.pretrain_len > 0;
    const std::string run = pretrained || !g.pretrain_run.empty() ? g.pretrain_run : "(random init)";
    std::string line = "| " + markdown_cell(g.label()) + " | " + k_text(g.k, "—") + " | " +
                       (pretrained ? std::to_string(g.pretrain_len) : "—") + " | " + std::to_string(g.finetune_len) +
                       " | " + markdown_cell(run) + " |";
    for (size_t i : shown) {
      const auto s = lookup(v, g, t.columns[i], left_out);
      // The paper's numbers are of its protocol (fixed epochs, the final weights) and of pretrained models.
      const auto p = papers_protocol(g.select) && pretrained ? t.paper(g, i) : std::nullopt;
      line.append(" ").append(cell(s)).append(" | ").append(paper_text(p)).append(" |");
      out.csv += t.name + "," + csv_field(g.label()) + "," + k_text(g.k, "") + "," +
                 (pretrained ? std::to_string(g.pretrain_len) : "") + "," + std::to_string(g.finetune_len) + "," +
                 csv_field(run) + "," + csv_field(t.columns[i].title) + "," +
                 (s ? fmt(s->mean) + "," + (s->n > 1 ? fmt(s->std) : "") + "," + std::to_string(s->n) : ",,0") + "," +
                 (p ? fmt(*p) : "") + "\n";
      out.json.push_back(json_row(t.name, g, t.columns[i].title, s, p));
    }
    out.markdown += line + "\n";
  }
  if (t.reference) render_reference(t, shown, out);
  out.markdown += "\n";
  if (!left_out.empty()) {
    out.markdown += "Left out of the means above, as scored on part of a dev set only:\n";
    for (const auto& note : left_out) out.markdown += "- " + note + "\n";
    out.markdown += "\n";
  }
}

// Table 3: GLUE dev; the paper's numbers for its five columns.
Table glue_table() {
  Table t3{"Table 3", "GLUE dev by position method (MNLI/SST-2/QNLI/RTE/WNLI accuracy, QQP/MRPC F1, CoLA MCC, "
                      "STS-B Pearson/Spearman).",
           {{"MNLI-m", "mnli", "dev_matched", "accuracy"},
            {"MNLI-mm", "mnli", "dev_mismatched", "accuracy"},
            {"QQP F1", "qqp", "dev", "f1"},
            {"SST-2", "sst2", "dev", "accuracy"},
            {"MRPC F1", "mrpc", "dev", "f1"},
            {"CoLA MCC", "cola", "dev", "mcc"},
            {"STS-B Pearson", "stsb", "dev", "pearson"},
            {"STS-B Spearman", "stsb", "dev", "spearman"},
            {"QNLI", "qnli", "dev", "accuracy"},
            {"RTE", "rte", "dev", "accuracy"},
            {"WNLI", "wnli", "dev", "accuracy"}},
           [](const GroupKey& g, size_t c) -> std::optional<double> {
             if (c > 4 || !unclipped(g)) return std::nullopt;
             for (const auto& r : paper::kTable3)
               if (g.method == r.method) {
                 const double vals[] = {r.mnli_m, r.mnli_mm, r.qqp_f1, r.sst2_acc, r.mrpc_f1};
                 return vals[c];
               }
             return std::nullopt;
           }};
  t3.reference = [](size_t c) -> std::optional<double> {
    const auto& r = paper::kTable3.front();  // Devlin et al.'s row
    const double vals[] = {r.mnli_m, r.mnli_mm, r.qqp_f1, r.sst2_acc, r.mrpc_f1};
    return c < 5 ? std::optional<double>(vals[c]) : std::nullopt;
  };
  t3.reference_label = "BERT (Devlin et al., published; GLUE test)";  // as the paper's Table 3 prints it
  return t3;
}

// Table 4: m4 by clipping distance k and fine-tuning length.
Table k_table() {
  Table t4{"Table 4", "Method 4 on SQuAD 1.1 dev by clipping distance k and fine-tuning length; the paper column "
                      "is the paper's row with the same k and fine-tuning length (its pretraining length is 512).",
           {{"EM", "squad_v1", "dev", "exact"}, {"F1", "squad_v1", "dev", "f1"}},
           [](const GroupKey& g, size_t c) -> std::optional<double> {
             // Unclipped (k = n - 1, 511 at n = 512) is the paper's "k = 512".
             const int64_t k = g.k >= g.pretrain_len - 1 ? 512 : g.k;
             for (const auto& r : paper::kTable4)
               if (r.k == k && r.finetune_len == g.finetune_len) return c == 0 ? r.em : r.f1;
             return std::nullopt;
           }};
  t4.keep = [](const GroupKey& g) { return g.method == "m4"; };
  // As the paper lists them: every k at the pretraining length, then the longer fine-tuning lengths.
  t4.before = [](const GroupKey& a, const GroupKey& b) {
    return std::tie(a.finetune_len, a.k) < std::tie(b.finetune_len, b.k);
  };
  return t4;
}

}  // namespace

RenderedTables render_tables(const std::vector<ResultRow>& all, const std::vector<std::string>& only) {
  const std::vector<std::string> names{"2", "3", "4", "squad2"};
  for (const auto& name : only)
    require(std::find(names.begin(), names.end(), name) != names.end(),
            "tables: unknown table '" + name + "' (valid: 2, 3, 4, squad2)");
  auto want = [&](const std::string& name) {
    return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
  };
  std::vector<std::string> replaced;
  const std::vector<ResultRow> rows = current_rows(all, replaced);  // not those of a run --overwrite replaced
  const Values v = collect(rows);
  RenderedTables out;
  out.markdown = "# Results\n\nOurs: mean ± sample std over seeds (n = seeds; one seed shows the value). "
                 "Paper: Huang et al. 2020, BERT-base.\n\n";
  out.csv = "table,method,k,pretrain_max_len,finetune_max_len,pretrain_run,column,mean,std,n,paper\n";
  if (const auto clashes = run_id_clashes(rows); !clashes.empty()) {
    out.markdown += "**Warning**: results of different runs under one name:\n";
    for (const auto& note : clashes) out.markdown += "- " + note + "\n";
    out.markdown += "\n";
  }
  if (!replaced.empty()) {
    out.markdown += "Results of runs replaced in their folders, not shown:\n";
    for (const auto& note : replaced) out.markdown += "- " + note + "\n";
    out.markdown += "\n";
  }

  Table t2{"Table 2", "SQuAD 1.1 dev, EM/F1 by position method.",
           {{"EM", "squad_v1", "dev", "exact"}, {"F1", "squad_v1", "dev", "f1"}},
           [](const GroupKey& g, size_t c) -> std::optional<double> {
             // The paper fine-tunes SQuAD at its pretraining length (512 both)
             if (!unclipped(g) || g.finetune_len != g.pretrain_len) return std::nullopt;
             for (const auto& r : paper::kTable2)
               if (g.method == r.method) return c == 0 ? r.em : r.f1;
             return std::nullopt;
           }};
  t2.reference = [](size_t c) { return c == 0 ? paper::kTable2.front().em : paper::kTable2.front().f1; };
  if (want("2")) render(t2, v, out);
  const Table t3 = glue_table();
  if (want("3")) render(t3, v, out);
  const Table t4 = k_table();
  if (want("4")) render(t4, v, out);

  Table t2b{"SQuAD 2.0", "SQuAD 2.0 dev (not in the paper): EM/F1 at the configured null threshold and the best "
                         "F1 over thresholds with that threshold (as the official v2.0 script reports).",
            {{"EM", "squad_v2", "dev", "exact"},
             {"F1", "squad_v2", "dev", "f1"},
             {"HasAns F1", "squad_v2", "dev", "HasAns_f1"},
             {"NoAns F1", "squad_v2", "dev", "NoAns_f1"},
             {"best F1", "squad_v2", "dev", "best_f1"},
             {"best F1 thresh", "squad_v2", "dev", "best_f1_thresh"}},
            [](const GroupKey&, size_t) -> std::optional<double> { return std::nullopt; }};
  if (want("squad2")) render(t2b, v, out);
  return out;
}

}  // namespace rpe::eval
