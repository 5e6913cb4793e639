// Tables 2-4 from result lines (see tables.h): which tables there are, their columns and the
// paper's numbers beside ours. Rows are grouped in table_cells.cpp and rendered in table_render.cpp.
#include "eval/tables.h"

#include <algorithm>
#include <optional>
#include <tuple>

#include "eval/paper_numbers.h"
#include "eval/table_cells.h"
#include "eval/table_render.h"
#include "util/errors.h"

namespace rpe::eval {
using namespace tables_detail;

namespace {

// The paper's Tables 2 and 3 compare the methods unclipped (its Table 4: m4 at k = 512 is Table
// 2's row): a row clipped shorter is another experiment, with no paper number beside it.
bool unclipped(const GroupKey& g) { return g.k == 0 || g.k >= g.pretrain_len - 1; }

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
             // Any fine-tuning length: the paper does not give GLUE's (Devlin et al. fine-tune at
             // 128 whatever the pretraining length), unlike SQuAD's (Table 2: its pretraining length).
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

// The paper's Table 4 row for one of ours. Every paper row is pretrained at 512, its k rows
// fine-tuned at 512 too. As Table 2 does, a row fine-tuned at its own pretraining length n is
// compared at any n, k as is (unclipped, k = n - 1, is the paper's "k = 512"). A row fine-tuned at
// another length is the paper's only where n is the paper's 512: at n = 128 a fine-tuning length of
// 512 is four times the pretraining length, not the paper's 512/512 (`tables table4-scaled`
// matches such rows by length ratio). Rows fine-tuned shorter than n have no paper row.
std::optional<paper::KRow> table4_paper_row(const GroupKey& g) {
  if (g.finetune_len != g.pretrain_len && g.pretrain_len != 512) return std::nullopt;
  const int64_t k = unclipped(g) ? 512 : g.k;  // k = 0 too: max_relative 0 is unclipped
  const int64_t ft = g.finetune_len == g.pretrain_len ? 512 : g.finetune_len;
  for (const auto& r : paper::kTable4)
    if (r.k == k && r.pretrain_len == 512 && r.finetune_len == ft) return r;
  return std::nullopt;
}

// Table 4: m4 by clipping distance k and fine-tuning length.
Table k_table() {
  Table t4{"Table 4", "Method 4 on SQuAD 1.1 dev by clipping distance k and fine-tuning length; the paper column "
                      "is the paper's row with the same k (pretrained and fine-tuned at 512) for a row fine-tuned at its "
                      "pretraining length, and at pretraining length 512 the row of the same k and fine-tuning length.",
           {{"EM", "squad_v1", "dev", "exact"}, {"F1", "squad_v1", "dev", "f1"}},
           [](const GroupKey& g, size_t c) -> std::optional<double> {
             const auto r = table4_paper_row(g);
             return r ? std::optional<double>(c == 0 ? r->em : r->f1) : std::nullopt;
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
  out.csv = "table,method,k,pretrain_max_len,finetune_max_len,pretrain_run,column,mean,std,n,paper,dev_examples\n";
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
