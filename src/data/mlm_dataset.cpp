// Deterministic, resumable MLM batch loader with optional background prefetch.
#include "data/mlm_dataset.h"

#include "util/errors.h"

namespace rpe {

namespace {
uint64_t mix64(uint64_t z) {  // SplitMix64's finalizer
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
}  // namespace

EpochPermutation::EpochPermutation(uint64_t n, uint64_t key) : n_(n), key_(key) {
  uint64_t bits = 2;
  while (bits < 64 && (uint64_t{1} << bits) < n) ++bits;
  bits += bits & 1;  // even: two halves of equal width
  half_bits_ = bits / 2;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
}

uint64_t EpochPermutation::operator()(uint64_t i) const {
  uint64_t x = i;
  do {  // cycle walking: the domain is [0, 4^half) >= n; at most ~4 rounds on average
    uint64_t left = x >> half_bits_, right = x & half_mask_;
    for (uint64_t round = 0; round < 4; ++round) {
      const uint64_t f = mix64(right ^ key_ ^ (round * 0x9E3779B97F4A7C15ULL)) & half_mask_;
      const uint64_t t = left ^ f;
      left = right, right = t;
    }
    x = (left << half_bits_) | right;
  } while (x >= n_);
  return x;
}

MlmLoader::MlmLoader(std::shared_ptr<const SequenceSource> data, const Tokenizer& tok, const LoaderOptions& options)
    : data_(std::move(data)),
      special_(tok.special()),
      first_regular_(tok.first_regular_id()),
      vocab_(tok.vocab_size()),
      o_(options) {
  require(data_ && data_->size() > 0, "no training sequences: the corpus produced no tokens");
  require(o_.world >= 1 && o_.rank >= 0 && o_.rank < o_.world, "loader: rank must be in [0, world)");
  require(o_.batch_size >= 1, "loader: batch size must be at least 1");
  scratch_tokens_.resize(static_cast<size_t>(data_->length()));
  scratch_starts_.resize(static_cast<size_t>(data_->length()));
  start_prefetch();
}

MlmLoader::~MlmLoader() { stop_prefetch(); }

int64_t MlmLoader::sequence_at(int64_t epoch, int64_t position) const {
  const int64_t n = data_->size();
  epoch += position / n;
  position %= n;
  if (!o_.shuffle) return position;
  const EpochPermutation perm(static_cast<uint64_t>(n),
                              masking_seed(o_.seed ^ 0x5EED5EEDULL, static_cast<uint64_t>(epoch), 0));
  return static_cast<int64_t>(perm(static_cast<uint64_t>(position)));
}

MlmBatch MlmLoader::make_batch(LoaderCursor& c) {
  const int64_t L = data_->length();
  const int64_t B = o_.batch_size, W = o_.world;
  const int64_t n = data_->size();
  const auto opts = torch::TensorOptions().pinned_memory(o_.pin_memory);
  auto ids = torch::empty({B, L}, opts.dtype(torch::kLong));      // [B, L]
  auto labels = torch::empty({B, L}, opts.dtype(torch::kLong));   // [B, L]
  auto padding = torch::empty({B, L}, opts.dtype(torch::kBool));  // [B, L]
  int64_t* ids_p = ids.data_ptr<int64_t>();
  int64_t* lab_p = labels.data_ptr<int64_t>();
  bool* pad_p = padding.data_ptr<bool>();
  int32_t* tok = scratch_tokens_.data();
  uint8_t* ws = scratch_starts_.data();
  int64_t tokens = 0;
  // The global batch is W*B positions; this rank takes every W-th one, from its rank on.
  for (int64_t b = 0; b < B; ++b) {
    const int64_t global = c.position + b * W + o_.rank;
    const int64_t epoch = c.epoch + global / n;
    const int64_t seq = sequence_at(c.epoch, global);
    data_->read(seq, tok, ws);
    // Masks depend on (seed, epoch, sequence) only: not on rank, world, batch size or method.
    mask_sequence(tok, ws, L, special_, first_regular_, vocab_, o_.masking,
                  masking_seed(o_.seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(seq)), ids_p + b * L,
                  lab_p + b * L);
    for (int64_t i = 0; i < L; ++i) {
      const bool pad = tok[i] == special_.pad;
      pad_p[b * L + i] = pad;
      tokens += !pad;
    }
  }
  data_->release_pages();  // the mapped pages this batch touched: page cache, not this rank's RSS
  c.position += B * W;
  c.epoch += c.position / n;
  c.position %= n;
  return {ids, labels, padding, tokens};
}

MlmBatch MlmLoader::next() {
  if (o_.prefetch == 0) return make_batch(cursor_);
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
  if (o_.prefetch == 0) return;
  stopping_ = false;
  queue_.clear();
  error_ = nullptr;
  worker_ = std::thread([this] {
    try {
      for (;;) {
        {
          std::unique_lock lock(mutex_);
          changed_.wait(lock, [&] { return stopping_ || static_cast<int64_t>(queue_.size()) < o_.prefetch; });
          if (stopping_) return;
        }
        LoaderCursor c = produce_;  // only this thread touches produce_ and the scratch rows while it runs
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

bool any_maskable(const SequenceSource& data, const SpecialIds& special, const MaskingOptions& options) {
  std::vector<int32_t> tokens(static_cast<size_t>(data.length()));
  std::vector<uint8_t> starts(tokens.size());
  for (int64_t i = 0; i < data.size(); ++i) {
    data.read(i, tokens.data(), starts.data());
    if (can_mask(tokens.data(), starts.data(), data.length(), special, options)) return true;
  }
  return false;
}

}  // namespace rpe
