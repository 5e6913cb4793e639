// MLM batches from packed sequences (in memory or lazily from shards: sequences.h).
// Sample order: epoch e visits the N sequences in the order perm_e(0), ..., perm_e(N-1),
// perm_e a pseudo-random permutation of [0, N) computed per position (EpochPermutation: no
// table in memory) from (seed, e). The global stream is epoch 0's order, then epoch 1's, ...;
// global batch k is positions [k*W*B, (k+1)*W*B) of it (W ranks, B sequences per rank, batches
// run across epoch ends) and rank r takes positions k*W*B + b*W + r, b = 0..B-1: ranks read
// disjoint shares whose union is the stream, and each reads only its own sequences. Masks are
// seeded by (seed, epoch, sequence) only. Hence the global stream and its masks depend on
// neither W nor B; changing the rank count with the same global batch W*B (and resuming from
// the same cursor) gives every step the same set of sequences, dealt to different ranks.
// The whole state is the cursor (epoch, position), saved in checkpoints: a resumed run sees
// exactly the batches an uninterrupted one would. With prefetch > 0 a background thread
// assembles and masks that many batches ahead (a bounded queue); the batches and cursors are
// the same as without it. pin_memory allocates batches in page-locked memory (CUDA runs),
// so the copies to the GPU can be non_blocking.
#pragma once
#include <torch/torch.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "data/masking.h"
#include "data/sequences.h"

namespace rpe {

struct MlmBatch {
  torch::Tensor ids;      // [B, L] int64, masked input
  torch::Tensor labels;   // [B, L] int64, kIgnoreLabel where not selected
  torch::Tensor padding;  // [B, L] bool, true at [PAD]
  int64_t tokens = 0;     // non-pad tokens in the batch
};

struct LoaderCursor {
  int64_t epoch = 0;
  int64_t position = 0;  // index into this epoch's permutation (of the global batch stream)
};

// A bijection of [0, n) chosen by a 64-bit key: a 4-round Feistel network on the smallest
// even number of bits covering n, with cycle walking (apply again until the value is < n).
class EpochPermutation {
 public:
  EpochPermutation(uint64_t n, uint64_t key);
  uint64_t operator()(uint64_t i) const;

 private:
  uint64_t n_, key_, half_bits_, half_mask_;
};

struct LoaderOptions {
  MaskingOptions masking;
  int64_t batch_size = 1;   // sequences per batch on this rank
  uint64_t seed = 0;        // order and masks
  bool shuffle = true;      // false: sequences in stored order (evaluation)
  int64_t rank = 0, world = 1;
  int64_t prefetch = 0;     // batches prepared ahead by a background thread; 0 = on demand
  bool pin_memory = false;  // page-locked batch tensors (set for CUDA)
};

class MlmLoader {
 public:
  MlmLoader(std::shared_ptr<const SequenceSource> data, const Tokenizer& tokenizer, const LoaderOptions& options);
  ~MlmLoader();
  MlmLoader(const MlmLoader&) = delete;
  MlmLoader& operator=(const MlmLoader&) = delete;

  MlmBatch next();  // wraps into the next epoch (reshuffled) when the data runs out
  LoaderCursor cursor() const { return cursor_; }  // position after the last batch next() returned
  void restore(const LoaderCursor& c);
  int64_t sequences() const { return data_->size(); }
  // Sequence index at global position `position` of `epoch` (positions past N run into later epochs).
  int64_t sequence_at(int64_t epoch, int64_t position) const;

 private:
  MlmBatch make_batch(LoaderCursor& c);  // the batch at c; advances c
  void start_prefetch();
  void stop_prefetch();

  std::shared_ptr<const SequenceSource> data_;
  SpecialIds special_;
  int32_t first_regular_;
  int64_t vocab_;
  LoaderOptions o_;
  LoaderCursor cursor_;
  std::vector<int32_t> scratch_tokens_;   // [L] one sequence, read from data_ (worker thread)
  std::vector<uint8_t> scratch_starts_;   // [L]

  // Background prefetch: the worker fills queue_ with (batch, cursor after it) from produce_.
  LoaderCursor produce_;
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::pair<MlmBatch, LoaderCursor>> queue_;
  std::exception_ptr error_;
  bool stopping_ = false;
};

// Whether any sequence of `data` has a token that masking selects (can_mask). Read in order
// until one has: a real corpus answers at its first sequence, and one with none (a corpus of a
// single long word) is small enough to read through.
bool any_maskable(const SequenceSource& data, const SpecialIds& special, const MaskingOptions& options);

}  // namespace rpe
