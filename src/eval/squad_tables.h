// The reproduction's SQuAD 1.1 tables beside the paper's Tables 2-4 (tables.h), rendered as
// plain tables (text_table.h). Rows group a result file's SQuAD dev lines (task squad_v1,
// metrics exact/f1) by (method, k, pretraining length, fine-tuning length, run name), the run
// name being the fine-tuning run folder without its "_s<seed>" suffix; numbers are mean ±
// sample std over seeds, a repeated evaluation of the same run and seed counting once.
//   table4_scaled: Table 4 (method 4 by k and fine-tuning length) at any pretraining length n,
//                  method 4's rows pretrained at n only; a row fine-tuned at n next to the
//                  paper's row of the same k at 512 (k >= n - 1 is the paper's unclipped 512),
//                  one fine-tuned beyond n next to the paper's row of k and length scaled by
//                  512/n (n * 576/512 -> 576, k = n/2 -> 256); none shorter than n
//   table5:        Table 5 (method 4 added to a pretrained absolute model) by fine-tuning length;
//                  the paper's numbers beside absolute and m4 rows only (a swap is not recorded)
//   extrapolation: per method, MLM loss by evaluation length (`rpe-train inspect --mlm-loss`)
//                  and SQuAD F1 by fine-tuning length
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "eval/results.h"
#include "eval/text_table.h"

namespace rpe::eval {

struct ScaledTable4Spec {
  int64_t pretrain_len = 0;                 // n of the pretraining runs
  std::vector<int64_t> ks, long_lens;       // the sweep, shown in the title
};
TextTable table4_scaled(const std::vector<ResultRow>& rows, const ScaledTable4Spec& spec);

// lens: the fine-tuning lengths of the sweep, shortest (the pretraining length) first; the
// i-th is matched with the paper's i-th (512, 576, 640, 704). The absolute rows are matched
// with the paper's pretrained model.
TextTable table5(const std::vector<ResultRow>& rows, const std::vector<int64_t>& lens);

// One `rpe-train inspect --mlm-loss` file: {"method", "pretrain_max_len", "mlm_loss": [{"length",
// "loss" (null when the method cannot take the length), "why"}]}.
struct MlmCurve {
  struct Point {
    int64_t length = 0;
    std::optional<double> loss;
    std::string why;
  };
  std::string method;
  int64_t pretrain_max_len = 0;
  std::vector<Point> points;
  std::string run;  // the pretraining run inspected ("run"; else, in older files, the file's path)
};
// UserError naming the file when it is missing, malformed or lacks a field.
MlmCurve read_mlm_curve(const std::filesystem::path& file);

// MLM rows first (curve by curve), then the SQuAD F1 rows in the curves' method order (methods
// without a curve after them, by name), each method's rows by fine-tuning length.
TextTable extrapolation_table(const std::vector<MlmCurve>& curves, const std::vector<ResultRow>& rows);

}  // namespace rpe::eval
