// The paper's tables rendered from result JSON lines (Markdown, CSV and JSON), our numbers as
// mean ± sample std over seeds (n = number of seeds) next to the published ones:
//   Table 2: SQuAD 1.1 dev EM/F1 by position method
//   Table 3: GLUE dev by position method (the paper's MNLI-m/mm, QQP F1, SST-2, MRPC F1,
//            plus the other tasks we ran)
//   Table 4: method 4 on SQuAD 1.1 dev by clipping distance k and fine-tuning length
// Rows are grouped by (method, k, pretraining length, fine-tuning length, pretraining run,
// fine-tuning run name: finetune_run_name, shown where two rows differ in it alone).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "eval/results.h"

namespace rpe::eval {

struct Stat {
  double mean = 0, std = 0;
  int64_t n = 0;
  // Dev examples each evaluation pooled here scored (0: unknown, lines of before the field).
  int64_t examples = 0;
};
// Mean and sample standard deviation (n - 1; 0 for one value).
Stat mean_std(const std::vector<double>& values);

struct RenderedTables {
  std::string markdown, csv;
  // The CSV's rows as objects with the same keys (k, mean, std, paper: null where the CSV is
  // empty), in the same order.
  nlohmann::ordered_json json = nlohmann::ordered_json::array();
};
// `only`: the tables to render by short name ("2", "3", "4", "squad2"); empty = all.
// UserError for an unknown name.
RenderedTables render_tables(const std::vector<ResultRow>& rows, const std::vector<std::string>& only = {});

}  // namespace rpe::eval
