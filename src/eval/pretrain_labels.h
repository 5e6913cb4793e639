// The pretraining run as a table row names it: its folder's name, or as many folders above it as
// tell two runs of one name apart (runs/lrA/base_m4 and runs/lrB/base_m4).
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "eval/results.h"

namespace rpe::eval {

// The label of each pretraining run of `rows`, keyed by its pretrain_identity.
std::map<std::filesystem::path, std::string> pretrain_labels(const std::vector<ResultRow>& rows);

// The pretrained model each row was fine-tuned from, as every table names it (one per row, in
// order): its run's label, and "/<checkpoint file>" where rows of that run come from two of its
// checkpoints. Rows of one label pool; rows of two never do.
std::vector<std::string> pretrained_model_labels(const std::vector<ResultRow>& rows);

}  // namespace rpe::eval
