// Deterministic, resumable MLM batch loader with optional background prefetch.
#include "data/mlm_dataset.h"

#include <numeric>

#include "util/errors.h"

namespace rpe {

MlmLoader::MlmLoader(std::shared_ptr<const PackedSequences> data, const Tokenizer& tok, MaskingOptions masking,
                     int64_t batch_size, uint64_t seed, bool shuffle, int64_t rank, int64_t world, int64_t prefetch)
    : data_(std::move(data)),
      special_(tok.special()),
      first_regular_(tok.first_regular_id()),
      vocab_(tok.vocab_size()),
      masking_(masking),
      batch_size_(batch_size),
      seed_(seed),
      shuffle_(shuffle),
      rank_(rank),
      world_(world),
      prefetch_(prefetch) {
  require(data_->size() > 0, "no training sequences: the corpus produced no tokens");
  require(world_ >= 1 && rank_ >= 0 && rank_ < world_, "loader: rank must be in [0, world)");
  start_prefetch();
}

MlmLoader::~MlmLoader() { stop_prefetch(); }

int64_t MlmLoader::sequence_at(int64_t epoch, int64_t position) {
  const int64_t n = data_->size();
  epoch += position / n;
  position %= n;
  if (!shuffle_) return position;
  auto it = orders_.find(epoch);
  if (it == orders_.end()) {
    if (orders_.size() >= 3) orders_.erase(orders_.begin());  // batches only look one epoch ahead
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    SplitMix64 rng(masking_seed(seed_ ^ 0x5EED5EEDULL, static_cast<uint64_t>(epoch), 0));
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    it = orders_.emplace(epoch, std::move(order)).first;
  }
  return it->second[static_cast<size_t>(position)];
}

MlmBatch MlmLoader::make_batch(LoaderCursor& c) {
  const int64_t L = data_->seq_len;
  const int64_t B = batch_size_;
  const int64_t n = data_->size();
  auto ids = torch::empty({B, L}, torch::kLong);      // [B, L]
  auto labels = torch::empty({B, L}, torch::kLong);   // [B, L]
  auto padding = torch::empty({B, L}, torch::kBool);  // [B, L]
  int64_t* ids_p = ids.data_ptr<int64_t>();
  int64_t* lab_p = labels.data_ptr<int64_t>();
  bool* pad_p = padding.data_ptr<bool>();
  int64_t tokens = 0;
  // The global batch is world*B sequences; this rank takes every world-th one.
  for (int64_t b = 0; b < B; ++b) {
    const int64_t global = c.position + b * world_ + rank_;
    const int64_t epoch = c.epoch + global / n;
    const int64_t seq = sequence_at(c.epoch, global);
    const int32_t* tok = data_->tokens.data() + seq * L;
    const uint8_t* ws = data_->word_start.data() + seq * L;
    // Masks depend on (seed, epoch, sequence) only: not on rank, world, batch size or method.
    mask_sequence(tok, ws, L, special_, first_regular_, vocab_, masking_,
                  masking_seed(seed_, static_cast<uint64_t>(epoch), static_cast<uint64_t>(seq)), ids_p + b * L,
                  lab_p + b * L);
    for (int64_t i = 0; i < L; ++i) {
      const bool pad = tok[i] == special_.pad;
      pad_p[b * L + i] = pad;
      tokens += !pad;
    }
  }
  c.position += B * world_;
  c.epoch += c.position / n;
  c.position %= n;
  return {ids, labels, padding, tokens};
}

MlmBatch MlmLoader::next() {
  if (prefetch_ == 0) return make_batch(cursor_);
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !queue_.empty() || error_; });
  if (queue_.empty()) std::rethrow_exception(error_);
  auto [batch, after] = std::move(queue_.front());
  queue_.pop_front();
  cursor_ = after;
  changed_.notify_all();
  return batch;
}

void MlmLoader::restore(const LoaderCursor& c) {
  stop_prefetch();
  cursor_ = c;
  start_prefetch();
}

void MlmLoader::start_prefetch() {
  produce_ = cursor_;
  if (prefetch_ == 0) return;
  stopping_ = false;
  queue_.clear();
  error_ = nullptr;
  worker_ = std::thread([this] {
    try {
      for (;;) {
        {
          std::unique_lock lock(mutex_);
          changed_.wait(lock, [&] { return stopping_ || static_cast<int64_t>(queue_.size()) < prefetch_; });
          if (stopping_) return;
        }
        LoaderCursor c = produce_;  // only this thread touches produce_ and orders_ while it runs
        MlmBatch batch = make_batch(c);
        produce_ = c;
        std::lock_guard lock(mutex_);
        queue_.emplace_back(std::move(batch), c);
        changed_.notify_all();
      }
    } catch (...) {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
      changed_.notify_all();
    }
  });
}

void MlmLoader::stop_prefetch() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
  queue_.clear();
}

}  // namespace rpe
