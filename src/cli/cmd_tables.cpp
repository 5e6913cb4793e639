// rpe-train tables: renders the paper's Tables 2-4 (tables.md, .csv, .json) from result lines,
// and, as subcommands, the reproduction's other tables (<name>.md/.csv/.json, text_table.h):
//   tables cost           per pretraining run: parameters, tokens/s, peak memory (cost_table.h)
//   tables table4-scaled  Table 4 at a reduced pretraining length, paper rows matched
//   tables table5         Table 5, method 4 added to a pretrained absolute model
//   tables extrapolation  MLM loss and SQuAD F1 beyond the pretraining length (squad_tables.h)
// Every input is read before anything is written: a missing or malformed file is one line
// naming it (exit 2) and creates no output; so is an --out no folder or file can be made in.
#include <iostream>
#include <set>
#include <system_error>

#include "cli/commands.h"
#include "cli/output_paths.h"
#include "eval/cost_table.h"
#include "eval/squad_tables.h"
#include "eval/tables.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/json_text.h"

namespace rpe::cli {
namespace fs = std::filesystem;
namespace {
struct TablesArgs {
  std::vector<std::string> results{"results/results.jsonl"};
  std::string out = "results";
  std::vector<std::string> only;
};

// The extra tables' arguments (each subcommand uses its own).
struct ExtraArgs {
  std::string out = "results";
  std::vector<std::string> results, runs, mlm;
  int64_t pretrain_len = 0;
  std::vector<int64_t> ks, long_lens, lens;
};

std::vector<eval::ResultRow> read_all(const std::vector<std::string>& files) {
  std::vector<eval::ResultRow> rows;
  for (const auto& f : files) {
    auto r = eval::read_results(f);
    rows.insert(rows.end(), r.begin(), r.end());
  }
  return rows;
}

int run_tables(const TablesArgs& a) {
  check_output_folder("--out", a.out);  // before reading: a bad --out fails fast, creates nothing
  const auto rows = read_all(a.results);
  const auto t = eval::render_tables(rows, a.only);
  write_output_into("--out " + a.out, a.out, [&] {  // all three or none (a full disk leaves the old ones)
    write_files_atomic({{fs::path(a.out) / "tables.md", t.markdown},
                        {fs::path(a.out) / "tables.csv", t.csv},
                        {fs::path(a.out) / "tables.json", dump_json(t.json, 2) + "\n"}});
  });
  std::cout << t.markdown;
  std::cout << "wrote " << (fs::path(a.out) / "tables.md").string() << ", tables.csv and tables.json ("
            << rows.size() << " result lines)\n";
  return 0;
}

// Renders one extra table: `make` reads the inputs and builds it (--out checked first).
int run_extra(const ExtraArgs& a, const std::function<eval::TextTable()>& make) {
  check_output_folder("--out", a.out);
  const eval::TextTable t = make();
  write_output_into("--out " + a.out, a.out, [&] { eval::write_table(a.out, t); });
  std::cout << eval::to_markdown(t) << "\n";
  std::cout << "wrote " << (fs::path(a.out) / (t.name + ".md")).string() << ", " << t.name << ".csv and " << t.name
            << ".json (" << t.rows.size() << " rows)\n";
  return 0;
}

eval::TextTable make_cost(const ExtraArgs& a) {
  std::set<fs::path> seen;
  for (const auto& r : a.runs) {
    std::error_code ec;
    const fs::path id = fs::weakly_canonical(r, ec);  // empty on failure: then the path as given
    if (!seen.insert(ec ? fs::path(r).lexically_normal() : id).second)
      throw UserError("--runs " + r + ": given twice (each run is one row)");
  }
  std::vector<eval::RunCost> runs;
  for (const auto& r : a.runs) runs.push_back(eval::read_run_cost(r));
  return eval::cost_table(runs);
}

eval::TextTable make_extrapolation(const ExtraArgs& a) {
  std::vector<eval::MlmCurve> curves;
  for (const auto& f : a.mlm) curves.push_back(eval::read_mlm_curve(f));
  return eval::extrapolation_table(curves, read_all(a.results));
}

// Adds one extra-table subcommand whose inputs `options` declares.
CLI::App* add_extra(CLI::App& parent, Runner& run, const std::string& name, const std::string& help,
                    const std::function<eval::TextTable(const ExtraArgs&)>& make,
                    const std::function<void(CLI::App&, ExtraArgs&)>& options) {
  auto* cmd = parent.add_subcommand(name, help);
  auto a = std::make_shared<ExtraArgs>();
  cmd->add_option("--out", a->out, "Folder for the table's .md, .csv and .json (default results)");
  options(*cmd, *a);
  cmd->callback([&run, a, make] { run = [a, make] { return run_extra(*a, [&] { return make(*a); }); }; });
  return cmd;
}

void add_extra_tables(CLI::App& cmd, Runner& run) {
  add_extra(cmd, run, "cost", "Cost per pretraining run: position/total parameters, tokens/s, peak memory -> cost.*",
            make_cost, [](CLI::App& c, ExtraArgs& a) {
              c.add_option("--runs", a.runs, "Finished pretraining run folders (summary.json, metrics.jsonl)")
                  ->required();
            });
  add_extra(
      cmd, run, "table4-scaled", "Table 4 at a reduced pretraining length, paper rows matched -> table4_scaled.*",
      [](const ExtraArgs& a) { return eval::table4_scaled(read_all(a.results), {a.pretrain_len, a.ks, a.long_lens}); },
      [](CLI::App& c, ExtraArgs& a) {
        c.add_option("--results", a.results, "Result files (JSON lines)")->required();
        c.add_option("--pretrain-len", a.pretrain_len, "Pretraining length n of the runs")
            ->required()
            ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
        c.add_option("--ks", a.ks, "The k sweep (for the title)")->delimiter(',');
        c.add_option("--long-lens", a.long_lens, "Fine-tuning lengths beyond n (for the title)")->delimiter(',');
      });
  add_extra(
      cmd, run, "table5", "Table 5, method 4 added to a pretrained absolute model -> table5.*",
      [](const ExtraArgs& a) { return eval::table5(read_all(a.results), a.lens); },
      [](CLI::App& c, ExtraArgs& a) {
        c.add_option("--results", a.results, "Result files (JSON lines)")->required();
        c.add_option("--lens", a.lens, "Fine-tuning lengths, pretraining length first (paper: 512 576 640 704)")
            ->required()
            ->delimiter(',');
      });
  add_extra(cmd, run, "extrapolation", "MLM loss and SQuAD F1 beyond the pretraining length -> extrapolation.*",
            make_extrapolation, [](CLI::App& c, ExtraArgs& a) {
              c.add_option("--mlm", a.mlm, "rpe-train inspect --mlm-loss files, one per method")->required();
              c.add_option("--results", a.results, "Result files of the fine-tuning sweep (JSON lines)");
            });
}
}  // namespace

void add_tables(CLI::App& app, Runner& run) {
  auto* cmd = app.add_subcommand(
      "tables", "Render Tables 2-4 (Markdown, CSV, JSON) from result JSON lines; subcommands: the reproduction's other tables");
  auto a = std::make_shared<TablesArgs>();
  cmd->add_option("--results", a->results, "Result files (JSON lines; default results/results.jsonl)");
  cmd->add_option("--out", a->out, "Folder for tables.md, tables.csv and tables.json (default results)");
  cmd->add_option("--only", a->only, "Render only these tables: 2, 3, 4, squad2 (default: all)")->delimiter(',');
  add_extra_tables(*cmd, run);
  // Runs after a subcommand's callback: only `tables` itself, without a subcommand, is Tables 2-4.
  cmd->callback([&run, a, cmd] {
    if (cmd->get_subcommands().empty()) {
      run = [a] { return run_tables(*a); };
    } else if (cmd->count("--out") + cmd->count("--only") + cmd->count("--results") > 0) {
      // `tables --out D cost` would write cost.* to the subcommand's default folder: refused.
      run = [] () -> int {
        throw UserError("tables: --out/--results/--only before a subcommand are Tables 2-4's; give the subcommand "
                        "its own after its name (e.g. tables cost --out DIR)");
      };
    }
  });
}

}  // namespace rpe::cli
