// Ordered parallel tokenization of a file's chunks; see chunk_pipeline.h.
#include "data/chunk_pipeline.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

namespace rpe {

void ChunkResult::clear() {
  ids.clear();
  starts.clear();
  sentence_lengths.clear();
  doc_sentences.clear();
  bad_utf8 = std::string_view::npos;
}

PipelineTimes& PipelineTimes::operator+=(const PipelineTimes& o) {
  read += o.read, tokenize += o.tokenize, commit += o.commit, wait += o.wait;
  return *this;
}

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Chunk k lives in slot k % window from its read until its commit.
struct Slot {
  std::string text;
  uint64_t offset = 0;
  ChunkResult result;
  std::exception_ptr error;  // reading or tokenizing it failed
  bool ready = false;        // tokenized (or failed): may be committed
};

class Pipeline {
 public:
  Pipeline(ChunkReader& reader, const ChunkPipeline& p)
      : reader_(reader), p_(p), window_(std::max<size_t>(1, p.window)), slots_(window_) {}

  PipelineTimes run() {
    const int threads = std::max(1, p_.threads);
    std::vector<PipelineTimes> times(static_cast<size_t>(threads));
    std::vector<std::thread> pool;
    try {
      for (int t = 1; t < threads; ++t) pool.emplace_back([this, &times, t] { work(times[static_cast<size_t>(t)]); });
    } catch (const std::system_error& e) {
      // The system refused a thread (EAGAIN): the ones started must stop and be joined, as a
      // joinable std::thread destroyed is std::terminate. Their partial work is dropped.
      stop(std::make_exception_ptr(std::system_error(
          e.code(), "cannot start tokenizer thread " + std::to_string(pool.size() + 2) + " of " +
                        std::to_string(threads) + " (use fewer threads)")));
      for (auto& t : pool) t.join();
      std::rethrow_exception(error_);
    }
    work(times[0]);
    for (auto& t : pool) t.join();
    if (error_) std::rethrow_exception(error_);
    PipelineTimes sum;
    for (const auto& t : times) sum += t;
    return sum;
  }

 private:
  Slot& slot(uint64_t k) { return slots_[k % window_]; }

  // Makes every thread leave its loop, with `error` thrown by run() unless one came first.
  void stop(std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::move(error);
    }
    changed_.notify_all();
  }

  // One thread's loop (see the header for the order of preference). `lock` guards the
  // counters and flags; the work itself runs unlocked.
  void work(PipelineTimes& time) {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!error_) {
      if (!committing_ && next_commit_ < next_read_ && slot(next_commit_).ready) {
        commit_next(lock, time);
      } else if (!reading_ && !eof_ && next_read_ - next_commit_ < window_) {
        read_and_tokenize(lock, time);
      } else if (eof_ && next_commit_ == next_read_) {
        break;
      } else {
        const auto t0 = Clock::now();
        changed_.wait(lock);
        time.wait += since(t0);
      }
    }
  }

  void commit_next(std::unique_lock<std::mutex>& lock, PipelineTimes& time) {
    committing_ = true;
    Slot& s = slot(next_commit_);
    lock.unlock();
    const auto t0 = Clock::now();
    std::exception_ptr error = s.error;
    if (!error) {
      try {
        p_.commit(s.result, s.offset);
      } catch (...) {
        error = std::current_exception();
      }
    }
    time.commit += since(t0);
    lock.lock();
    committing_ = false;
    if (error) {  // the first error in file order: chunks after it are never committed
      error_ = error;
    } else {
      s.ready = false;
      ++next_commit_;
    }
    changed_.notify_all();
  }

  void read_and_tokenize(std::unique_lock<std::mutex>& lock, PipelineTimes& time) {
    reading_ = true;
    const uint64_t k = next_read_;
    Slot& s = slot(k);
    lock.unlock();
    auto t0 = Clock::now();
    bool got = true;
    try {
      got = reader_.next(s.text, s.offset);
    } catch (...) {
      s.error = std::current_exception();  // reported when chunk k's turn to commit comes
    }
    time.read += since(t0);
    lock.lock();
    reading_ = false;
    if (!got || s.error) eof_ = true;  // nothing is read after a read error
    if (got) ++next_read_;
    changed_.notify_all();
    if (!got || s.error) {
      s.ready = got;
      return;
    }
    lock.unlock();
    t0 = Clock::now();
    try {
      s.result.clear();
      p_.tokenize(s.text, s.result);
    } catch (...) {
      s.error = std::current_exception();
    }
    time.tokenize += since(t0);
    lock.lock();
    s.ready = true;
    changed_.notify_all();
  }

  ChunkReader& reader_;
  const ChunkPipeline& p_;
  const size_t window_;
  std::vector<Slot> slots_;
  std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t next_read_ = 0, next_commit_ = 0;  // chunks read so far / committed so far
  bool reading_ = false, committing_ = false, eof_ = false;
  std::exception_ptr error_;
};
}  // namespace

PipelineTimes run_chunk_pipeline(ChunkReader& reader, const ChunkPipeline& p) { return Pipeline(reader, p).run(); }

}  // namespace rpe
