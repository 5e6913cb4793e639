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

}  // namespace rpe::eval
