// rpe-train tables: renders the paper's Tables 2-4 (Markdown + CSV) from result lines.
#include <iostream>

#include "cli/commands.h"
#include "cli/output_paths.h"
#include "eval/tables.h"
#include "util/atomic_file.h"
#include "util/errors.h"

namespace rpe::cli {
namespace fs = std::filesystem;
namespace {
struct TablesArgs {
  std::vector<std::string> results{"results/results.jsonl"};
  std::string out = "results";
  std::vector<std::string> only;
};

int run_tables(const TablesArgs& a) {
  check_output_folder("--out", a.out);  // before reading: a bad --out fails fast, creates nothing
  std::vector<eval::ResultRow> rows;
  for (const auto& f : a.results) {
    auto r = eval::read_results(f);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  const auto t = eval::render_tables(rows, a.only);
  fs::create_directories(a.out);
  write_file_atomic(fs::path(a.out) / "tables.md", t.markdown);
  write_file_atomic(fs::path(a.out) / "tables.csv", t.csv);
  std::cout << t.markdown;
  std::cout << "wrote " << (fs::path(a.out) / "tables.md").string() << " and tables.csv (" << rows.size()
            << " result lines)\n";
  return 0;
}
}  // namespace

void add_tables(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand("tables", "Render Tables 2-4 (Markdown + CSV) from result JSON lines");
  auto a = std::make_shared<TablesArgs>();
  cmd->add_option("--results", a->results, "Result files (JSON lines; default results/results.jsonl)");
  cmd->add_option("--out", a->out, "Folder for tables.md and tables.csv (default results)");
  cmd->add_option("--only", a->only, "Render only these tables: 2, 3, 4, squad2 (default: all)")->delimiter(',');
  cmd->callback([&run, a] { run = [a] { return run_tables(*a); }; });
}

}  // namespace rpe::cli
