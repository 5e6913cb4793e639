// Result JSON lines (see results.h).
#include "eval/results.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <type_traits>

#include "config/config.h"
#include "config/method_catalogue.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/file_tree.h"
#include "util/json_text.h"
#include "util/log.h"

namespace rpe::eval {
using nlohmann::json;

json to_json(const ResultRow& r) {
  json j{{"run_id", r.run_id},       {"method", r.method},
         {"k", r.k},                 {"pretrain_run", r.pretrain_run},
         {"pretrain_max_len", r.pretrain_max_len}, {"task", r.task},
         {"split", r.split},         {"seed", r.seed},
         {"metric", r.metric},       {"value", r.value},
         {"finetune_max_len", r.finetune_max_len}, {"examples", r.examples},
         {"select", r.select},       {"git_revision", r.git_revision}, {"time", r.time},
         {"run_dir", r.run_dir}};
  if (!r.run_started.empty()) j["run_started"] = r.run_started;
  if (!r.pretrain_checkpoint.empty()) j["pretrain_checkpoint"] = r.pretrain_checkpoint;
  if (r.position_buckets > 0) j["position_buckets"] = r.position_buckets;  // written where a method buckets
  if (!r.pretrain_method.empty()) j["pretrain_method"] = r.pretrain_method;
  return j;
}

namespace {
// nlohmann converts any number to an integer by truncation: a k of 8.5 would become 8 and be
// matched to the paper's k=8 row. An integer field takes integers only (8.0, as some writers
// spell them, included), within int64. `v` is a number.
void require_integer(const json& v, const std::string& where, const char* key) {
  const double d = v.get<double>();
  const bool integral = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)
                        : v.is_number_integer() ? true
                                                : std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 0x1p63;
  if (!integral) throw UserError(where + ": field '" + key + "' must be an integer, not " + v.dump());
}

// Every metric rpe-train writes is a percentage, signed for correlations; a value outside its
// range is a hand-edited or foreign line that would move a table's mean. Other metrics (SQuAD
// 2.0's best_*_thresh, any real number) are not checked.
void require_in_range(const ResultRow& r, const std::string& where) {
  static const std::set<std::string> percentages = {"exact",        "f1",        "accuracy",    "best_exact", "best_f1",
                                                    "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1"};
  static const std::set<std::string> correlations = {"mcc", "pearson", "spearman"};
  const bool signed_range = correlations.count(r.metric) > 0;
  if (!signed_range && percentages.count(r.metric) == 0) return;
  const double lo = signed_range ? -100 : 0, hi = 100;
  if (r.value >= lo && r.value <= hi) return;
  throw UserError(where + ": field 'value' " + json(r.value).dump() + " is outside [" +
                  std::to_string(static_cast<int>(lo)) + ", " + std::to_string(static_cast<int>(hi)) + "], the range of " +
                  r.metric);
}
// A row no table can place (a method or task rpe-train has not, a negative distance or length)
// is a hand edit gone wrong: named, not shown as a table row of its own or dropped silently.
void require_known(const ResultRow& r, const std::string& where) {
  if (!method_catalogue().empty() && find_method_facts(r.method) == nullptr)
    throw UserError(where + ": unknown method '" + r.method + "'");
  if (!method_catalogue().empty() && !r.pretrain_method.empty() && find_method_facts(r.pretrain_method) == nullptr)
    throw UserError(where + ": unknown pretrain_method '" + r.pretrain_method + "'");
  static const std::set<std::string> squad = {"squad_v1", "squad_v2", "squad"};  // "squad": lines of before _v1
  const auto& tasks = finetune_task_names();  // squad, then the GLUE tasks
  if (!squad.count(r.task) && std::find(tasks.begin() + 1, tasks.end(), r.task) == tasks.end())
    throw UserError(where + ": unknown task '" + r.task + "' (valid: squad_v1, squad_v2, " +
                    join(std::vector<std::string>(tasks.begin() + 1, tasks.end())) + ")");
  for (const auto& [key, value] :
       {std::pair{"k", r.k}, {"pretrain_max_len", r.pretrain_max_len}, {"position_buckets", r.position_buckets}})
    if (value < 0) throw UserError(where + ": field '" + key + "' " + std::to_string(value) + " is negative");
  if (r.finetune_max_len < 0)
    throw UserError(where + ": field 'finetune_max_len' " + std::to_string(r.finetune_max_len) + " is negative");
}
}  // namespace

ResultRow result_from_json(const json& j, const std::string& where) {
  auto get = [&](const char* key, auto& out) {
    if (!j.contains(key)) throw UserError(where + ": missing field '" + key + "'");
    const json& v = j.at(key);
    if constexpr (std::is_same_v<std::decay_t<decltype(out)>, int64_t>)
      if (v.is_number()) require_integer(v, where, key);  // other types: "wrong type" below
    try {
      v.get_to(out);
    } catch (const json::exception&) {
      throw UserError(where + ": field '" + std::string(key) + "' has the wrong type");
    }
  };
  ResultRow r;
  get("run_id", r.run_id);
  get("method", r.method);
  get("k", r.k);
  if (j.contains("position_buckets")) get("position_buckets", r.position_buckets);  // absent: none
  get("pretrain_run", r.pretrain_run);
  if (j.contains("pretrain_checkpoint")) get("pretrain_checkpoint", r.pretrain_checkpoint);
  get("pretrain_max_len", r.pretrain_max_len);
  if (j.contains("pretrain_method")) get("pretrain_method", r.pretrain_method);  // absent: not known
  get("task", r.task);
  get("split", r.split);
  get("seed", r.seed);
  get("metric", r.metric);
  get("value", r.value);
  get("finetune_max_len", r.finetune_max_len);
  if (j.contains("examples")) get("examples", r.examples);
  if (j.contains("select")) get("select", r.select);  // lines of before the field: the default, final
  if (j.contains("git_revision")) get("git_revision", r.git_revision);
  if (j.contains("time")) get("time", r.time);
  if (j.contains("run_dir")) get("run_dir", r.run_dir);
  if (j.contains("run_started")) get("run_started", r.run_started);
  require_in_range(r, where);
  require_known(r, where);
  return r;
}

std::filesystem::path pretrain_identity(const std::string& pretrain_run) {
  std::filesystem::path p = folder_path(folder_path(pretrain_run).lexically_normal());
  return p.filename() == "checkpoints" ? p.parent_path() : p;
}

std::string finetune_run_name(const ResultRow& r) {
  static const std::regex seed_suffix(R"(_s\d+$)");
  const bool glue = r.task.rfind("squad", 0) != 0;
  std::string name = r.run_id.substr(0, r.run_id.find('/'));
  if (glue && name == r.task)  // the default folder, <run.root>/<run.name>/<task>
    name = r.run_dir.empty() ? "" : std::filesystem::path(r.run_dir).parent_path().filename().string();
  name = std::regex_replace(name, seed_suffix, "");
  const std::string task_suffix = "_" + r.task;
  if (glue && name.size() > task_suffix.size() && name.compare(name.size() - task_suffix.size(), task_suffix.size(), task_suffix) == 0)
    name.resize(name.size() - task_suffix.size());
  return name;
}

std::vector<std::string> run_id_clashes(const std::vector<ResultRow>& rows) {
  // What a table keys an evaluation by, folder aside: rows alike in all of it replace each other.
  // (Two folders of one name whose rows differ elsewhere, another method or task, stay apart.)
  std::map<std::string, std::string> first;  // that key -> the first folder seen
  std::vector<std::string> notes;
  for (const auto& r : rows) {
    if (r.run_dir.empty()) continue;
    const std::string id = r.run_id + " (seed " + std::to_string(r.seed) + ")";
    const std::string key = dump_json(json{id, r.method, r.k, r.position_buckets, pretrain_identity(r.pretrain_run).string(),
                                           r.pretrain_checkpoint, finetune_run_name(r), r.pretrain_max_len,
                                           r.finetune_max_len, r.select, r.task, r.split, r.metric});
    const auto [it, fresh] = first.emplace(key, r.run_dir);
    if (fresh || it->second == r.run_dir) continue;
    const std::string note = "run id " + id + " names two runs, " + it->second + " and " + r.run_dir +
                             ": the tables keep the later line (give the runs folders of distinct names, or "
                             "separate finetune.results_file)";
    if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
  }
  return notes;
}

std::vector<ResultRow> current_rows(const std::vector<ResultRow>& rows, std::vector<std::string>& notes) {
  std::map<std::string, std::string> newest;  // run_dir -> its latest run_started
  for (const auto& r : rows)
    if (!r.run_dir.empty() && !r.run_started.empty() && r.run_started > newest[r.run_dir]) newest[r.run_dir] = r.run_started;
  std::vector<ResultRow> kept;
  std::map<std::pair<std::string, std::string>, int64_t> dropped;  // (run_dir, run_started) -> lines
  for (const auto& r : rows) {
    // An undated line of a folder a dated run wrote is older than it (every run since records
    // run_started, and a folder is made again only by --overwrite): replaced, as an older date is.
    // Lines of a folder no dated run wrote, or of no folder, are kept: nothing says they were.
    const auto it = newest.find(r.run_dir);
    if (r.run_dir.empty() || it == newest.end() || r.run_started == it->second)
      kept.push_back(r);
    else
      ++dropped[{r.run_dir, r.run_started}];
  }
  for (const auto& [run, lines] : dropped) {
    const auto& [dir, started] = run;
    const std::string which = started.empty() ? "a run of before run_started" : "the run started " + started;
    const std::string note = "left out: " + std::to_string(lines) + " result line(s) of " + which + " in " + dir +
                             ", replaced there by the run started " + newest.at(dir) + " (--overwrite)";
    if (std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(note);
  }
  return kept;
}

void append_results(const std::filesystem::path& file, const std::vector<ResultRow>& rows) {
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  for (const auto& r : rows) append_line_synced(file, dump_json(to_json(r)));  // run and pretrain_run come from paths
}

std::vector<ResultRow> read_results(const std::filesystem::path& file) {
  const std::string text = read_file(file);
  std::istringstream in(text);
  std::vector<ResultRow> rows;
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = file.string() + ":" + std::to_string(n);
    json j;
    try {
      j = parse_json_line(line, file, n);  // any nlohmann failure (1e400 too) names file:line
    } catch (const UserError&) {
      // The file's last line without its newline, begun as a row, is a write a crash cut short
      // (the next append cuts it off): that evaluation is lost, the others stand. Anything else
      // (a checkpoint or other file's last bytes) is an error.
      const size_t first = line.find_first_not_of(" \t\r");
      if (in.eof() && !text.empty() && text.back() != '\n' && first != std::string::npos && line[first] == '{') {
        log::warn("results", "{}: a line cut short by an interrupted write, left out; rerun that evaluation", where);
        continue;
      }
      throw;
    }
    if (!j.is_object()) throw UserError(where + ": expected a JSON object");
    rows.push_back(result_from_json(j, where));
  }
  return rows;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string utc_now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  std::tm tm{};
  gmtime_r(&ts.tv_sec, &tm);
  char buf[48];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%09ldZ", static_cast<long>(ts.tv_nsec));
  return buf;
}

}  // namespace rpe::eval
