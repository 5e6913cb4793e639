// Tagged logging over spdlog: one logger for the console and, once a run folder
// exists, a train.log inside it. Lines carry a tag ("[data]", "[train]", "[valid]").
// In a multi-process run only rank 0 logs at info level; other ranks log warnings and up.
#pragma once
#include <spdlog/spdlog.h>
#include <filesystem>
#include <string>

namespace rpe::log {

// Sets up the console logger (call once in main). quiet=true shows warnings and up only.
void init(bool quiet = false);
// <file> as a second sink while this object lives, or until close() (nothing for an empty path).
// It opens with the lines logged since the previous file sink opened or closed (at most 200; one
// for no file, another rank's, clears them too), so a run folder made after the inputs were read
// and checked still logs how the run began.
class FileSink {
 public:
  explicit FileSink(const std::filesystem::path& file);
  ~FileSink() { close(); }
  FileSink(const FileSink&) = delete;
  FileSink& operator=(const FileSink&) = delete;
  void close();
  // `message` as an error line ("... error <message>") of the file alone: an error the command prints on stderr as it
  // ends (main's "error: ..."), kept with the run it stopped.
  void error_to_file(const std::string& message);

 private:
  spdlog::sink_ptr sink_;
};
// Non-zero ranks are lowered to warnings so the console shows one copy of each line; theirs
// carry "[rank R]".
void set_rank(int rank);
int rank();  // as set_rank set it (0 in a single process)

template <typename... Args>
void info(const char* tag, spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::info("[{}] {}", tag, fmt::format(fmt, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(const char* tag, spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::warn("[{}] {}", tag, fmt::format(fmt, std::forward<Args>(args)...));
}
// A warning every rank would give alike (about the config, or data every rank shares): rank 0's
// copy alone, so that 64 ranks do not log it 64 times.
template <typename... Args>
void warn_rank0(const char* tag, spdlog::format_string_t<Args...> fmt, Args&&... args) {
  if (rank() == 0) warn(tag, fmt, std::forward<Args>(args)...);
}
template <typename... Args>
void debug(const char* tag, spdlog::format_string_t<Args...> fmt, Args&&... args) {
  spdlog::debug("[{}] {}", tag, fmt::format(fmt, std::forward<Args>(args)...));
}

}  // namespace rpe::log
