// The cost table from pretraining run folders (see cost_table.h).
#include "eval/cost_table.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <map>
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

std::vector<SpeedWindow> training_speeds(const fs::path& file) {
  std::istringstream in(read_file(file));
  std::vector<SpeedWindow> speeds;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const json j = parse_json_line(line, file, n);
    if (!j.is_object() || !j.contains("tokens_per_s")) continue;
    if (j.contains("split") && j["split"] == "valid") continue;
    if (!j["tokens_per_s"].is_number())
      throw UserError(file.string() + ":" + std::to_string(n) + ": field 'tokens_per_s' is not a number");
    const int64_t step = j.contains("step") && j["step"].is_number_integer() ? j["step"].get<int64_t>() : 0;
    speeds.push_back({step, j["tokens_per_s"].get<double>()});
  }
  return speeds;
}

// summary.json's world_sizes ([{first_step, last_step, world_size (null: not recorded)}]), else
// its world_size for every step; empty when it has neither (a run of before either).
std::vector<RankStretch> rank_stretches(const json& s, const fs::path& file) {
  const auto bad = [&](const std::string& what) { return UserError(file.string() + ": field 'world_sizes' " + what); };
  std::vector<RankStretch> out;
  if (s.contains("world_sizes")) {
    if (!s["world_sizes"].is_array()) throw bad("is not a list");
    for (const json& r : s["world_sizes"]) {
      if (!r.is_object() || !r.contains("first_step") || !r["first_step"].is_number_integer() ||
          !r.contains("last_step") || !r["last_step"].is_number_integer() || !r.contains("world_size") ||
          !(r["world_size"].is_null() || r["world_size"].is_number_integer()))
        throw bad("holds an entry that is not {first_step, last_step, world_size}: " + excerpt(r.dump()));
      out.push_back({r["first_step"].get<int64_t>(), r["last_step"].get<int64_t>(),
                     r["world_size"].is_null() ? std::nullopt : std::optional<int64_t>(r["world_size"].get<int64_t>())});
    }
  } else if (const auto world = number_field(s, "world_size", file)) {
    out.push_back({1, std::numeric_limits<int64_t>::max(), static_cast<int64_t>(*world)});
  }
  return out;
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

// The ranks a window ending at `step` ran on: its stretch's; a run on one recorded number of
// ranks gives it to every window (rows without a step too). nullopt: not recorded.
std::optional<int64_t> ranks_at(const std::vector<RankStretch>& ranks, int64_t step) {
  if (ranks.size() == 1) return ranks.front().world;
  for (const auto& r : ranks)
    if (step >= r.first_step && step <= r.last_step) return r.world;
  return std::nullopt;
}

std::string ranks_text(const std::optional<int64_t>& world) {
  return world ? std::to_string(*world) : std::string("?");
}

// "8", or for a run resumed on other numbers of ranks each in turn, "8, 16" ("?" where not
// recorded); JSON: the number, or the stretches.
Cell ranks_cell(const std::vector<RankStretch>& ranks) {
  if (ranks.empty()) return Cell::dash();
  if (ranks.size() == 1 && ranks.front().world) return Cell::integer(*ranks.front().world);
  std::string text;
  json stretches = json::array();
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i == 0 || ranks[i].world != ranks[i - 1].world) text += (text.empty() ? "" : ", ") + ranks_text(ranks[i].world);
    stretches.push_back({{"first_step", ranks[i].first_step},
                         {"last_step", ranks[i].last_step},
                         {"world_size", ranks[i].world ? json(*ranks[i].world) : json(nullptr)}});
  }
  return Cell::shown(text, stretches);
}

// The median tokens/s of `windows`; one per number of ranks ("12,501 (8 ranks); 24,990 (16
// ranks)") when they ran on several, whose sum of every rank's tokens is not one speed.
Cell speed_cell(const std::vector<SpeedWindow>& windows, const std::vector<RankStretch>& ranks) {
  std::map<std::optional<int64_t>, std::vector<double>> by_ranks;
  for (const auto& w : windows) by_ranks[ranks_at(ranks, w.step)].push_back(w.tokens_per_s);
  if (by_ranks.empty()) return Cell::dash();
  if (by_ranks.size() == 1) {
    const double m = median(by_ranks.begin()->second);
    return Cell::shown(with_thousands(m), m);
  }
  std::string text;
  json value = json::array();
  for (const auto& [world, speeds] : by_ranks) {
    const double m = median(speeds);
    text += (text.empty() ? "" : "; ") + with_thousands(m) + " (" + ranks_text(world) + " ranks)";
    value.push_back({{"world_size", world ? json(*world) : json(nullptr)}, {"median", m}});
  }
  return Cell::shown(text, value);
}

// The median over `windows` of tokens/s divided by the ranks each ran on (those recorded).
Cell per_rank_cell(const std::vector<SpeedWindow>& windows, const std::vector<RankStretch>& ranks) {
  std::vector<double> per_rank;
  for (const auto& w : windows)
    if (const auto world = ranks_at(ranks, w.step); world && *world > 0)
      per_rank.push_back(w.tokens_per_s / static_cast<double>(*world));
  if (per_rank.empty()) return Cell::dash();
  const double m = median(per_rank);
  return Cell::shown(with_thousands(m), m);
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
  c.ranks = rank_stretches(s, summary_file);
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
              {"method", "run", "position parameters", "total parameters", "ranks", "tokens/s (median)",
               "tokens/s per rank (median)", "peak memory", "steps", "train s", "held-out MLM loss"},
              {}, {}};
  for (const auto& c : runs) {
    std::vector<Cell> row{c.method, c.run};
    row.push_back(c.position_params ? Cell::shown(with_thousands(static_cast<double>(*c.position_params)),
                                                  *c.position_params)
                                    : Cell::dash());
    row.push_back(c.total_params_m ? Cell::shown(Cell::number(*c.total_params_m, 2).text + "M", *c.total_params_m * 1e6)
                                   : Cell::dash());
    row.push_back(ranks_cell(c.ranks));
    // The first window includes start-up: dropped unless it is the only one.
    const std::vector<SpeedWindow> windows(c.tokens_per_s.begin() + (c.tokens_per_s.size() > 1 ? 1 : 0),
                                           c.tokens_per_s.end());
    row.push_back(speed_cell(windows, c.ranks));
    row.push_back(per_rank_cell(windows, c.ranks));
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
