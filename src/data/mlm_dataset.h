// MLM batches from packed sequences: an epoch is a seeded permutation of the sequences,
// a batch is the next `batch_size` of them, masked dynamically (masking.h). The loader's
// whole state is its cursor (epoch, position), saved in checkpoints, so a resumed run sees
// exactly the batches an uninterrupted one would. With world > 1, each global batch of
// world * batch_size sequences is dealt out rank by rank (rank r takes every world-th), so
// ranks see disjoint sequences. With prefetch > 0 a background thread prepares that many
// batches ahead; the batches and cursors are the same as without it.
#pragma once
#include <torch/torch.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "data/masking.h"
#include "data/packing.h"

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

class MlmLoader {
 public:
  MlmLoader(std::shared_ptr<const PackedSequences> data, const Tokenizer& tokenizer, MaskingOptions masking,
            int64_t batch_size, uint64_t seed, bool shuffle, int64_t rank = 0, int64_t world = 1,
            int64_t prefetch = 0);
  ~MlmLoader();
  MlmLoader(const MlmLoader&) = delete;
  MlmLoader& operator=(const MlmLoader&) = delete;

  MlmBatch next();  // wraps into the next epoch (reshuffled) when the data runs out
  LoaderCursor cursor() const { return cursor_; }  // position after the last batch next() returned
  void restore(const LoaderCursor& c);
  int64_t sequences() const { return data_->size(); }
  // Sequence index (row of the packed data) at global position `position` of `epoch`.
  int64_t sequence_at(int64_t epoch, int64_t position);

 private:
  MlmBatch make_batch(LoaderCursor& c);  // the batch at c; advances c
  void start_prefetch();
  void stop_prefetch();

  std::shared_ptr<const PackedSequences> data_;
  SpecialIds special_;
  int32_t first_regular_;
  int64_t vocab_;
  MaskingOptions masking_;
  int64_t batch_size_;
  uint64_t seed_;
  bool shuffle_;
  int64_t rank_, world_;
  LoaderCursor cursor_;
  std::map<int64_t, std::vector<int64_t>> orders_;  // epoch -> permutation (a few cached)

  // Background prefetch: the worker fills queue_ with (batch, cursor after it) from produce_.
  int64_t prefetch_;
  LoaderCursor produce_;
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::pair<MlmBatch, LoaderCursor>> queue_;
  std::exception_ptr error_;
  bool stopping_ = false;
};

}  // namespace rpe
