// Scaled Table 4, Table 5 and the length-extrapolation table (see squad_tables.h).
#include "eval/squad_tables.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <tuple>

#include "eval/dev_sizes.h"
#include "eval/paper_numbers.h"
#include "eval/pretrain_labels.h"
#include "eval/table_cells.h"
#include "util/errors.h"
#include "util/file_tree.h"
#include "util/json_text.h"

namespace rpe::eval {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct SquadGroup {
  std::string method;
  int64_t buckets = 0;  // deberta's log buckets: another model than the clipped one at the same k
  int64_t k = 0, pretrain_len = 0, finetune_len = 0;
  std::string name;    // fine-tuning run folder without "_s<seed>"
  // The pretrained model fine-tuned (pretrained_model_labels), as in Tables 2-4: one fine-tuning
  // run name from two pretraining runs or checkpoints is two models, never one row. Named in the
  // row's label where the table has rows alike in all else (named_model).
  std::string pretrained;
  bool named_model = false;
  std::string select;  // finetune.select: dev-best weights are another protocol than the final ones
  // The method the weights were pretrained with where `method` was swapped in (swapped_method),
  // else ""; lineage_known: some row records it (lines of before the field do not).
  std::string swapped_from;
  bool lineage_known = false;
  // (run_id, seed) -> (value, dev questions scored): a re-evaluation replaces
  std::map<std::string, tables_detail::Scored> exact, f1;

  std::string label(const std::string& what) const {
    const std::string model = pretrained.empty() ? "none" : pretrained;  // "": from random weights
    return with_protocol(named_model ? what + " (pretraining run " + model + ")" : what, select);
  }
  std::string method_label() const { return method_text(method, buckets, swapped_from); }

  // The values of the evaluations of the whole dev set: those that scored fewer questions
  // (finetune.max_eval_examples, a debugging run) are another quantity, not pooled (as in
  // Tables 2-4); each one left out is named in `notes`.
  tables_detail::Pooled pooled(const std::map<std::string, tables_detail::Scored>& m, std::vector<std::string>& notes) const {
    tables_detail::Pooled p = tables_detail::pool_most_examples(m);
    for (const auto& [run, examples] : p.left_out) {
      const std::string note = "not pooled: " + run + " (" + label(name) + ": " + std::to_string(examples) + " of " +
                               std::to_string(p.most) + " dev questions)";
      if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
    }
    return p;
  }
  std::vector<double> values(const std::map<std::string, tables_detail::Scored>& m, std::vector<std::string>& notes) const {
    return pooled(m, notes).values;
  }

  // The cell of one metric over those values, marked "(dev N of M)" where they scored part of the
  // dev set only (every seed pooled there ran with finetune.max_eval_examples, or on a sample dev
  // file; pooled() names only seeds that scored fewer than another): the paper's numbers beside it
  // are of all of SQuAD 1.1 dev, not the same quantity; a note under the table says so.
  Cell cell(const std::map<std::string, tables_detail::Scored>& m, bool with_n, std::vector<std::string>& notes) const {
    const tables_detail::Pooled p = pooled(m, notes);
    Cell c = stat_cell(p.values, with_n);
    const std::string part = dev_part_text("squad_v1", "dev", p.most);
    if (p.values.empty() || part.empty()) return c;
    c.text += " (dev " + part + ")";
    c.value["dev_examples"] = p.most;
    c.value["dev_size"] = *full_dev_size("squad_v1", "dev");
    const std::string note = "\"(dev N of M)\": scored on N of SQuAD 1.1 dev's M questions only "
                             "(finetune.max_eval_examples, or a sample dev file); the paper's numbers, where "
                             "shown, are of the whole dev set, not the same quantity";
    if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
    return c;
  }
};

// The groups of the current rows (current_rows: a run replaced by --overwrite counts no more),
// one per pretrained model and fine-tuning run; what was left out and the run ids of two folders
// go to `notes`.
std::vector<SquadGroup> squad_groups(const std::vector<ResultRow>& all, std::vector<std::string>& notes) {
  const std::vector<ResultRow> rows = current_rows(all, notes);
  const auto clashes = run_id_clashes(rows);
  notes.insert(notes.end(), clashes.begin(), clashes.end());
  const auto pretrained = pretrained_model_labels(rows);
  using Key = std::tuple<std::string, int64_t, int64_t, int64_t, int64_t, std::string, std::string, std::string, std::string>;
  std::map<Key, SquadGroup> groups;
  for (size_t i = 0; i < rows.size(); ++i) {
    const ResultRow& r = rows[i];
    if ((r.task != "squad_v1" && r.task != "squad") || (r.metric != "exact" && r.metric != "f1")) continue;
    const std::string name = finetune_run_name(r);
    // The paper's protocol (final weights) sorts before the others of the same run.
    const std::string protocol = papers_protocol(r.select) ? std::string() : r.select;
    const std::string swapped_from = swapped_method(r) ? r.pretrain_method : "";
    auto& g = groups[{r.method, r.position_buckets, r.k, r.pretrain_max_len, r.finetune_max_len, pretrained[i], name, protocol,
                      swapped_from}];
    g.method = r.method;
    g.buckets = r.position_buckets;
    g.k = r.k;
    g.pretrain_len = r.pretrain_max_len;
    g.finetune_len = r.finetune_max_len;
    g.name = name;
    g.pretrained = pretrained[i];
    g.select = r.select;
    g.swapped_from = swapped_from;
    g.lineage_known = g.lineage_known || !r.pretrain_method.empty();
    (r.metric == "exact" ? g.exact : g.f1)[r.run_id + "#" + std::to_string(r.seed)] = {r.value, r.examples};
  }
  auto model_aside = [](Key k) {
    std::get<5>(k).clear();
    return k;
  };
  std::map<Key, int> models;  // groups alike but for their pretrained model
  for (const auto& [key, _] : groups) ++models[model_aside(key)];
  std::vector<SquadGroup> out;
  for (auto& [key, g] : groups) {
    g.named_model = models[model_aside(key)] > 1;
    out.push_back(std::move(g));
  }
  return out;
}

Cell paper_cell(const std::optional<double>& v) { return v ? Cell::number(*v, 2) : Cell::dash(); }

// "[2, 4, 8]"
std::string list_text(const std::vector<int64_t>& xs) {
  std::string s = "[";
  for (size_t i = 0; i < xs.size(); ++i) s += (i ? ", " : "") + std::to_string(xs[i]);
  return s + "]";
}

// The paper's Table 4 row for ours at pretraining length n (one rule, docs/reproduce.md):
// - fine-tuned at n: the row of the same k, as is (the k sweep's distances are tokens; the
//   unclipped k >= n - 1 is the paper's "512"), fine-tuned at 512;
// - fine-tuned beyond n: length and k both scaled by 512/n (n * 576/512 -> 576; the paper's long
//   rows are its k = 256 model, ours k = n/2), exactly, else no row; at n = 512 this is as is;
// - fine-tuned shorter than n: no paper row (the paper has none shorter than its 512).
struct PaperRow {
  std::optional<int64_t> k, finetune_len;  // nullopt: no paper row corresponds
  std::optional<double> em, f1;
};
std::optional<int64_t> scaled_to_512(int64_t x, int64_t n) {
  if (n <= 0 || (x * 512) % n != 0) return std::nullopt;
  return x * 512 / n;
}
PaperRow paper_table4_row(int64_t k, int64_t ft, int64_t n) {
  PaperRow p;
  if (ft == n) {
    p.k = k == 0 || k >= n - 1 ? 512 : k;  // k = 0 is unclipped (model.attention.max_relative: 0)
    p.finetune_len = 512;
  } else if (ft > n) {
    p.k = scaled_to_512(k, n);
    p.finetune_len = scaled_to_512(ft, n);
  }
  if (!p.k || !p.finetune_len) return PaperRow{};
  for (const auto& r : paper::kTable4)
    if (r.k == *p.k && r.pretrain_len == 512 && r.finetune_len == *p.finetune_len) {
      p.em = r.em;
      p.f1 = r.f1;
    }
  return p;
}
Cell paper_row_cell(const PaperRow& p) {
  if (!p.k || !p.finetune_len) return Cell::dash();
  return Cell::shown("k=" + std::to_string(*p.k) + ", " + std::to_string(*p.finetune_len),
                     {{"k", *p.k}, {"finetune_len", *p.finetune_len}});
}

// A model fine-tuned from random weights (--init none, pretrain_max_len 0): no pretraining
// length to show, and no paper row, whose models were all pretrained.
Cell pretrain_len_cell(int64_t len) { return len > 0 ? Cell::integer(len) : Cell::dash(); }

// Each curve's row label: its method, and "(pretraining run <folder>)" where another curve has the
// same method and pretraining length (two runs' rows would print alike); the run as given where
// two such folders share a name.
std::vector<std::string> mlm_curve_labels(const std::vector<MlmCurve>& curves) {
  std::map<std::pair<std::string, int64_t>, int> alike;
  std::map<std::string, int> folders;
  auto folder = [](const MlmCurve& c) { return folder_path(c.run).filename().string(); };
  for (const auto& c : curves) {
    ++alike[{c.method, c.pretrain_max_len}];
    ++folders[folder(c)];
  }
  std::vector<std::string> labels;
  for (const auto& c : curves) {
    if (alike[{c.method, c.pretrain_max_len}] == 1) {
      labels.push_back(c.method);
      continue;
    }
    labels.push_back(c.method + " (pretraining run " + (folders[folder(c)] > 1 ? c.run : folder(c)) + ")");
  }
  return labels;
}

}  // namespace

TextTable table4_scaled(const std::vector<ResultRow>& rows, const ScaledTable4Spec& spec) {
  TextTable t{"table4_scaled",
              "Table 4 (method 4 by k and fine-tuning length), pretraining length " + std::to_string(spec.pretrain_len) +
                  ", k list " + list_text(spec.ks) + ", long lengths " + list_text(spec.long_lens) +
                  "; paper row matched by k and length ratio",
              {"run", "k", "pretrain len", "fine-tune len", "EM", "F1", "seeds", "paper row", "paper EM", "paper F1"},
              {}, {}};
  auto groups = squad_groups(rows, t.notes);
  // The table is method 4's at pretraining length n: rows of another method (an absolute run in the
  // same results file) or pretrained at another length (or not at all) would be matched to paper
  // rows by this n's ratios; they are left out, counted in a note.
  const auto other = std::remove_if(groups.begin(), groups.end(), [&](const SquadGroup& g) {
    return g.method != "m4" || g.buckets != 0 || g.pretrain_len != spec.pretrain_len;
  });
  if (other != groups.end())
    t.notes.push_back("left out: " + std::to_string(groups.end() - other) +
                      " row(s) of another method or not pretrained at length " + std::to_string(spec.pretrain_len));
  groups.erase(other, groups.end());
  std::stable_sort(groups.begin(), groups.end(), [](const SquadGroup& a, const SquadGroup& b) {
    return std::tie(a.finetune_len, a.k) < std::tie(b.finetune_len, b.k);
  });
  for (const auto& g : groups) {
    PaperRow p = paper_table4_row(g.k, g.finetune_len, spec.pretrain_len);
    const auto f1 = g.values(g.f1, t.notes);
    // The paper's numbers are of final weights, pretrained with method 4 (not swapped in).
    if (!papers_protocol(g.select) || !g.swapped_from.empty()) p.em = p.f1 = std::nullopt;
    t.rows.push_back({g.label(g.name), Cell::integer(g.k), pretrain_len_cell(g.pretrain_len), Cell::integer(g.finetune_len),
                      g.cell(g.exact, false, t.notes), g.cell(g.f1, false, t.notes),
                      Cell::integer(static_cast<int64_t>(f1.size())), paper_row_cell(p), paper_cell(p.em),
                      paper_cell(p.f1)});
  }
  return t;
}

TextTable table5(const std::vector<ResultRow>& rows, const std::vector<int64_t>& lens) {
  // The paper's m4 numbers stand beside m4 swapped into absolute pretraining (swap-method, or
  // --init of an absolute run with method m4), its absolute ones beside absolute pretrained as
  // such. Lines of before pretrain_method do not say which: they keep the paper's numbers, and a
  // note says they are meant for swaps only.
  TextTable t{"table5",
              "Table 5: method 4 added to a pretrained absolute model (near drop-in), SQuAD 1.1 dev; "
              "paper: BERT-large at 512/576/640/704, method 4 swapped into its pretrained absolute model",
              {"run", "method", "pretrain len", "fine-tune len", "EM", "F1", "seeds", "paper EM", "paper F1"},
              {}, {}};
  auto groups = squad_groups(rows, t.notes);
  std::stable_sort(groups.begin(), groups.end(), [](const SquadGroup& a, const SquadGroup& b) {
    return std::make_tuple(a.method != "absolute", a.finetune_len) < std::make_tuple(b.method != "absolute", b.finetune_len);
  });
  // The paper's first row, Devlin et al.'s published BERT-large: no run of ours stands beside it.
  if (!groups.empty())
    t.rows.push_back({"BERT (Devlin et al., published)", "absolute", Cell::integer(512), Cell::integer(512),
                      Cell::dash(), Cell::dash(), Cell::integer(0), paper_cell(paper::kTable5Bert.em),
                      paper_cell(paper::kTable5Bert.f1)});
  for (const auto& g : groups) {
    const auto ours = g.values(g.f1, t.notes);
    std::optional<double> em, f1;
    // The paper's rows are of final weights pretrained at its first length (512; --lens scales it),
    // absolute BERT fine-tuned at that length too.
    const bool comparable = papers_protocol(g.select) && g.pretrain_len != 0 && !lens.empty() && g.pretrain_len == lens.front();
    const bool swap_of_absolute = g.swapped_from == "absolute" || !g.lineage_known;
    if (comparable && !g.lineage_known && (g.method == "absolute" || g.method == "m4")) {
      const std::string note = "rows whose result lines do not record the pretraining method (written before "
                               "pretrain_method) show the paper's numbers: they compare with method 4 swapped into an "
                               "absolute model (table5.sh's drop_in_m4_*) only, not with a model pretrained with m4";
      if (std::find(t.notes.begin(), t.notes.end(), note) == t.notes.end()) t.notes.push_back(note);
    }
    if (comparable && g.method == "absolute" && g.swapped_from.empty() && g.finetune_len == lens.front()) {
      em = paper::kTable5Absolute.em;
      f1 = paper::kTable5Absolute.f1;
    } else if (comparable && g.method == "m4" && g.buckets == 0 && swap_of_absolute) {  // the paper's swap: to method 4
      const auto it = std::find(lens.begin(), lens.end(), g.finetune_len);
      const size_t i = static_cast<size_t>(it - lens.begin());
      if (it != lens.end() && i < paper::kTable5M4.size()) {
        em = paper::kTable5M4[i].em;
        f1 = paper::kTable5M4[i].f1;
      }
    }
    t.rows.push_back({g.label(g.name), g.method_label(), pretrain_len_cell(g.pretrain_len), Cell::integer(g.finetune_len),
                      g.cell(g.exact, false, t.notes), g.cell(g.f1, false, t.notes),
                      Cell::integer(static_cast<int64_t>(ours.size())), paper_cell(em), paper_cell(f1)});
  }
  return t;
}

MlmCurve read_mlm_curve(const fs::path& file) {
  const json j = read_json_file(file);
  MlmCurve c;
  try {
    c.method = j.at("method").get<std::string>();
    c.pretrain_max_len = j.at("pretrain_max_len").get<int64_t>();
    c.run = j.contains("run") && j["run"].is_string() ? j["run"].get<std::string>() : file.string();
    for (const auto& p : j.at("mlm_loss")) {
      MlmCurve::Point pt;
      pt.length = p.at("length").get<int64_t>();
      if (!p.at("loss").is_null()) pt.loss = p.at("loss").get<double>();
      pt.why = p.value("why", "");
      c.points.push_back(std::move(pt));
    }
  } catch (const json::exception&) {
    throw UserError(file.string() + ": expected {\"method\", \"pretrain_max_len\", \"mlm_loss\": [{\"length\", "
                                    "\"loss\"}, ...]} (rpe-train inspect --mlm-loss)");
  }
  return c;
}

TextTable extrapolation_table(const std::vector<MlmCurve>& curves, const std::vector<ResultRow>& rows) {
  TextTable t{"extrapolation", "Length extrapolation per method", {"method", "measure", "pretrain len", "length", "value"},
              {}, {}};
  std::map<std::string, size_t> order;  // a method's first curve
  const auto labels = mlm_curve_labels(curves);
  for (size_t i = 0; i < curves.size(); ++i) {
    const auto& c = curves[i];
    order.emplace(c.method, order.size());
    for (const auto& p : c.points)
      t.rows.push_back({labels[i], "MLM loss", Cell::integer(c.pretrain_max_len), Cell::integer(p.length),
                        p.loss ? Cell::number(*p.loss, 3) : Cell::shown("n/a (" + p.why + ")", nullptr)});
  }
  auto groups = squad_groups(rows, t.notes);
  auto rank = [&](const SquadGroup& g) {
    const auto it = order.find(g.method);
    return std::make_tuple(it == order.end() ? order.size() : it->second, g.method, g.buckets, g.finetune_len);
  };
  std::stable_sort(groups.begin(), groups.end(),
                   [&](const SquadGroup& a, const SquadGroup& b) { return rank(a) < rank(b); });
  for (const auto& g : groups)
    t.rows.push_back({g.label(g.method_label()), "SQuAD F1", pretrain_len_cell(g.pretrain_len), Cell::integer(g.finetune_len),
                      g.cell(g.f1, true, t.notes)});
  return t;
}

}  // namespace rpe::eval
