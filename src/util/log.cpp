// Tagged spdlog wrapper: console sink always, file sink once a run folder exists.
#include "util/log.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>
#include <deque>
#include <mutex>
#include <vector>

#include "util/errors.h"

namespace rpe::log {
namespace {

// The lines logged since the last file sink opened or closed (the newest kMaxLines): a command
// that makes its run folder only after reading and checking its inputs (fine-tuning) still gets
// its start-up lines (data, init, model) into that folder's log.
class Preamble final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<spdlog::details::log_msg_buffer> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<spdlog::details::log_msg_buffer> out(std::make_move_iterator(lines_.begin()),
                                                     std::make_move_iterator(lines_.end()));
    lines_.clear();
    return out;
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (lines_.size() == kMaxLines) lines_.pop_front();
    lines_.emplace_back(msg);
  }
  void flush_() override {}

 private:
  static constexpr size_t kMaxLines = 200;
  std::deque<spdlog::details::log_msg_buffer> lines_;
};

// One for the process, attached to the logger by init() (before that, or without it, it stays empty).
const std::shared_ptr<Preamble>& preamble() {
  static const auto p = std::make_shared<Preamble>();
  return p;
}

}  // namespace

void init(bool quiet) {
  // Logs go to stdout so that stderr carries only the one-line error of a failed command.
  auto console = std::make_shared<spdlog::sinks::stdout_color_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("rpe", spdlog::sinks_init_list{console, preamble()});
  logger->set_pattern("%H:%M:%S %^%l%$ %v");
  logger->set_level(quiet ? spdlog::level::warn : spdlog::level::info);
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

FileSink::FileSink(const std::filesystem::path& file) {
  if (file.empty()) {  // a run without a file here (another rank): its lines must not open a later one's
    preamble()->take();
    return;
  }
  sink_ = std::make_shared<spdlog::sinks::basic_file_sink_mt>(file.string(), /*truncate=*/false);
  sink_->set_pattern("%Y-%m-%d %H:%M:%S.%e %l %v");
  for (const auto& line : preamble()->take()) sink_->log(line);  // with their own times
  sink_->flush();
  spdlog::default_logger()->sinks().push_back(sink_);
}

void FileSink::error_to_file(const std::string& message) {
  if (!sink_) return;
  sink_->log(spdlog::details::log_msg("rpe", spdlog::level::err, one_line(message)));  // as main prints it
  sink_->flush();
}

void FileSink::close() {
  if (!sink_) return;
  preamble()->take();  // the next file starts from what is logged after this one
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_), sinks.end());
  sink_.reset();
}

namespace {
int g_rank = 0;
}

int rank() { return g_rank; }

void set_rank(int rank) {
  g_rank = rank;
  if (rank == 0) return;
  auto logger = spdlog::default_logger();
  logger->set_level(spdlog::level::warn);
  // Which rank warns: a warning of one node's (its disk, its device) reads apart from the
  // copies every rank logs of a shared one (the config's).
  logger->set_pattern("%H:%M:%S %^%l%$ [rank " + std::to_string(rank) + "] %v");
}

}  // namespace rpe::log
