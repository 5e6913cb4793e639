// rpe-train entry point: parses the command line and dispatches to one subcommand.
// User errors (bad config, missing files, bad data) print one line and exit with 2;
// failures of the environment (disk full, out of memory, I/O error) print one line and
// exit with 1. Whatever escapes a command, stderr gets exactly one line.
#include <c10/util/Exception.h>

#include <algorithm>
#include <csignal>
#include <iostream>
#include <new>
#include <string_view>
#include <system_error>
#include <vector>

#include "cli/commands.h"
#include "util/cpu_memory.h"
#include "util/errors.h"
#include "util/kernel_check.h"
#include "util/log.h"
#include "util/stop_signals.h"
#include "util/utf8.h"

void rpe::cli::silence_logs() { spdlog::default_logger()->set_level(spdlog::level::off); }

namespace {

// CLI11 says only "A subcommand is required" when `finetune` or `predict` is given no task or
// a misspelt one: name the command, its choices and what it got instead. Empty when the error
// is another one.
std::string missing_subcommand_text(const CLI::App* app, const CLI::Error& e) {
  if (dynamic_cast<const CLI::RequiredError*>(&e) == nullptr) return "";
  const CLI::App* at = app;
  std::string command = "rpe-train";
  while (!at->get_subcommands().empty()) {
    at = at->get_subcommands().front();
    command += " " + at->get_name();
  }
  if (at == app || at->get_require_subcommand_min() == 0) return "";
  std::string choices;
  for (const CLI::App* sub : at->get_subcommands([](const CLI::App*) { return true; }))
    choices += (choices.empty() ? "" : " or ") + sub->get_name();
  // The word given where the subcommand goes: that command's first leftover, unless it is an
  // option (`predict --model x`: x is the option's value, not a subcommand).
  const auto left = at->remaining();
  const bool word = !left.empty() && !left.front().empty() && left.front()[0] != '-';
  return command + ": name one of " + choices + " (`" + command + " --help`)" +
         (word ? ", got '" + left.front() + "'" : "");
}

// Levenshtein distance, for "did you mean" on a misspelt command.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// CLI11 says "The following argument was not expected: pretrian" for a command it does not know:
// say it is no command, name the nearest one when it is a likely typo, and list them all. Empty
// when the error is another one (a stray word after a known command keeps CLI11's text).
std::string unknown_command_text(const CLI::App* app, const CLI::Error& e) {
  if (dynamic_cast<const CLI::ExtrasError*>(&e) == nullptr || app->get_parent() != nullptr ||
      !app->get_subcommands().empty())
    return "";
  const auto left = app->remaining();
  if (left.empty() || left.front().empty() || left.front()[0] == '-') return "";
  const std::string& word = left.front();
  std::string commands, nearest;
  size_t best = 3;  // at most two edits away: a typo, not another word
  for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
    commands += (commands.empty() ? "" : ", ") + sub->get_name();
    if (const size_t d = edit_distance(word, sub->get_name()); d < best) best = d, nearest = sub->get_name();
  }
  return "rpe-train: no command '" + word + "'" + (nearest.empty() ? "" : "; did you mean '" + nearest + "'?") +
         " (commands: " + commands + "; `rpe-train --help`)";
}

int report(const std::string& message, int code) {
  std::cerr << "error: " << rpe::one_line(message) << "\n";
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rpe-train: BERT pretraining and fine-tuning with pluggable position embeddings"};
  app.require_subcommand(0, 1);
  app.failure_message([](const CLI::App* at, const CLI::Error& e) {
    std::string text = missing_subcommand_text(at, e);
    if (text.empty()) text = unknown_command_text(at, e);
    return "error: " + rpe::one_line(text.empty() ? e.what() : text) + "\n";
  });
  bool version = false;
  app.add_flag("--version", version, "Print rpe-train, LibTorch and CUDA versions and the devices seen");
  rpe::cli::Runner run;
  rpe::cli::add_pretrain(app, run);
  rpe::cli::add_dump_config(app, run);
  rpe::cli::add_tokenize(app, run);
  rpe::cli::add_prepare_data(app, run);
  rpe::cli::add_train_tokenizer(app, run);
  rpe::cli::add_import_hf(app, run);
  rpe::cli::add_export_hf(app, run);
  rpe::cli::add_inspect(app, run);
  rpe::cli::add_swap_method(app, run);
  rpe::cli::add_finetune(app, run);
  rpe::cli::add_predict(app, run);
  rpe::cli::add_tables(app, run);
  rpe::cli::add_evaluate(app, run);
  rpe::cli::add_methods(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : rpe::kExitUserError;
  }
  rpe::log::init();
  rpe::keep_freed_host_memory();
  rpe::flush_denormals();
  try {
    rpe::disabled_cuda_kernels();  // a misspelt kernel name stops here, not at the first forward pass
    if (version) return rpe::cli::print_version();
    if (!run) {
      std::cout << app.help();
      return rpe::kExitUserError;
    }
    return run();
  } catch (const rpe::StopRequested& e) {
    // Stopped by a signal after saving (train/engine.h): end by it, as its default action would
    // have, so that torchrun, Slurm and the shell see the run ended by the signal they sent. At
    // train.time_limit_min: exit code 75, for a job script to resubmit the run.
    spdlog::default_logger()->flush();
    std::cout.flush();
    if (e.signal() == 0) return rpe::kExitTimeLimit;  // stopped at train.time_limit_min
    std::signal(e.signal(), SIG_DFL);
    std::raise(e.signal());
    return 128 + e.signal();
  } catch (const rpe::UserError& e) {
    return report(e.what(), rpe::kExitUserError);
  } catch (const c10::Error& e) {
    // An allocation the device or host cannot make (CUDA's OutOfMemoryError; the CPU
    // allocator's "not enough memory"): the sizes the user chose, so say which ones.
    const std::string text = e.what_without_backtrace();
    if (dynamic_cast<const c10::OutOfMemoryError*>(&e) != nullptr || text.find("not enough memory") != std::string::npos ||
        text.find("can't allocate memory") != std::string::npos)
      return report("out of memory: " + text.substr(0, text.find('\n')) +
                        " (the batch or the lengths asked for do not fit: lower them, e.g. train.batch_size, "
                        "data.max_seq_len, finetune.max_seq_len or inspect's --lengths; training can also set "
                        "train.activation_checkpointing)",
                    1);
    return report("LibTorch: " + text, 1);
  } catch (const std::system_error& e) {
    // std::filesystem::filesystem_error (what() names the operation and the path(s):
    // "filesystem error: cannot create directories: Not a directory [runs/x]"),
    // std::ios_base::failure and writers' "cannot write FILE: <errno text>".
    return report(e.what(), rpe::environment_error(e.code()) ? 1 : rpe::kExitUserError);
  } catch (const std::bad_alloc&) {
    return report("out of memory (the model, batch or data does not fit; try smaller sizes)", 1);
  } catch (const std::exception& e) {
    return report(std::string("internal error: ") + e.what(), 1);
  } catch (...) {
    return report("internal error: unknown exception", 1);
  }
}
