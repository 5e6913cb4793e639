// The cost table from pretraining run folders (see cost_table.h).
#include "eval/cost_table.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <regex>
#include <sstream>
#include <system_error>

#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/file_tree.h"
#include "util/json_text.h"

namespace rpe::eval {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A numeric field of summary.json: absent or null -> nullopt; anything else not a number is
// a UserError naming the file and the key.
std::optional<double> number_field(const json& j, const char* key, const fs::path& file) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  if (!j.at(key).is_number()) throw UserError(file.string() + ": field '" + key + "' is not a number");
  return j.at(key).get<double>();
}

std::vector<double> training_speeds(const fs::path& file) {
  std::istringstream in(read_file(file));
  std::vector<double> speeds;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const json j = parse_json_line(line, file, n);
    if (!j.is_object() || !j.contains("tokens_per_s")) continue;
    if (j.contains("split") && j["split"] == "valid") continue;
    if (!j["tokens_per_s"].is_number())
      throw UserError(file.string() + ":" + std::to_string(n) + ": field 'tokens_per_s' is not a number");
    speeds.push_back(j["tokens_per_s"].get<double>());
  }
  return speeds;
}

// For summaries of before their parameter counts: the last "<x>M parameters, <n> in position
// method" line of train.log, if any (a refused --resume of another model also logs one).
void logged_parameter_counts(const fs::path& log, RunCost& c) {
  std::error_code ec;
  if (!fs::is_regular_file(log, ec)) return;
  static const std::regex pattern(R"(([\d.]+)M parameters, (\d+) in position method)");
  std::istringstream in(read_file(log));
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, pattern)) {
      c.total_params_m = std::stod(m[1].str());
      c.position_params = std::stoll(m[2].str());
    }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

RunCost read_run_cost(const fs::path& run_dir) {
  // "runs/x/" names the run "x", not "".
  const fs::path dir = folder_path(run_dir);
  const fs::path summary_file = dir / "summary.json";
  std::error_code ec;
  if (!fs::is_regular_file(summary_file, ec))
    throw UserError(summary_file.string() + ": missing (the pretraining run has not finished)");
  const json s = read_json_file(summary_file);
  if (!s.is_object()) throw UserError(summary_file.string() + ": expected a JSON object");
  RunCost c;
  c.run = dir.filename().string();
  c.method = s.contains("method") && s["method"].is_string() ? s["method"].get<std::string>() : c.run;
  c.tokens_per_s = training_speeds(dir / "metrics.jsonl");
  const auto params = number_field(s, "parameters", summary_file);
  const auto position = number_field(s, "position_parameters", summary_file);
  if (params && position) {
    c.total_params_m = *params / 1e6;
    c.position_params = static_cast<int64_t>(*position);
  } else {
    logged_parameter_counts(dir / "train.log", c);
  }
  c.peak_device_bytes = static_cast<int64_t>(number_field(s, "peak_device_bytes", summary_file).value_or(0));
  c.peak_rss_bytes = static_cast<int64_t>(number_field(s, "peak_rss_bytes", summary_file).value_or(0));
  if (const auto steps = number_field(s, "steps", summary_file)) c.steps = static_cast<int64_t>(*steps);
  // A run resumed across processes: the training time of all of them (summaries of before the
  // field give the last process's wall time).
  c.wall_s = number_field(s, "train_s", summary_file).value_or(number_field(s, "wall_s", summary_file).value_or(0));
  c.valid_loss = number_field(s, "valid_loss", summary_file);
  return c;
}

TextTable cost_table(const std::vector<RunCost>& runs) {
  TextTable t{"cost",
              "Cost per method (pretraining runs of this table)",
              {"method", "run", "position parameters", "total parameters", "tokens/s (median)", "peak memory", "steps",
               "train s", "held-out MLM loss"},
              {}, {}};
  for (const auto& c : runs) {
    std::vector<Cell> row{c.method, c.run};
    row.push_back(c.position_params ? Cell::shown(with_thousands(static_cast<double>(*c.position_params)),
                                                  *c.position_params)
                                    : Cell::dash());
    row.push_back(c.total_params_m ? Cell::shown(Cell::number(*c.total_params_m, 2).text + "M", *c.total_params_m * 1e6)
                                   : Cell::dash());
    // The first window includes start-up: dropped unless it is the only one.
    std::vector<double> speeds(c.tokens_per_s.begin() + (c.tokens_per_s.size() > 1 ? 1 : 0), c.tokens_per_s.end());
    if (speeds.empty()) {
      row.push_back(Cell::dash());
    } else {
      const double m = median(speeds);
      row.push_back(Cell::shown(with_thousands(m), m));
    }
    const bool device = c.peak_device_bytes > 0;
    const int64_t peak = device ? c.peak_device_bytes : c.peak_rss_bytes;
    if (peak <= 0) {
      row.push_back(Cell::dash());
    } else {
      const double mib = static_cast<double>(peak) / (1 << 20);
      row.push_back(Cell::shown(with_thousands(mib) + " MiB (" + (device ? "GPU" : "process RSS") + ")",
                                {{"bytes", peak}, {"of", device ? "GPU" : "process RSS"}}));
    }
    row.push_back(c.steps ? Cell::integer(*c.steps) : Cell::dash());
    row.push_back(Cell::number(c.wall_s, 0));
    row.push_back(c.valid_loss ? Cell::number(*c.valid_loss, 3) : Cell::dash());
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace rpe::eval
