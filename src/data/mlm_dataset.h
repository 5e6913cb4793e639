// MLM batches from packed sequences: an epoch is a seeded permutation of the sequences,
// a batch is the next `batch_size` of them, masked dynamically. The loader's whole state
// is (epoch, position), saved in checkpoints so a resumed run sees the same batches.
#pragma once
#include <torch/torch.h>

#include <memory>

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
  int64_t position = 0;  // index into this epoch's permutation
};

class MlmLoader {
 public:
  // rank/world: each rank takes a disjoint stride of every global batch.
  MlmLoader(std::shared_ptr<const PackedSequences> data, const Tokenizer& tokenizer, MaskingOptions masking,
            int64_t batch_size, uint64_t seed, bool shuffle, int64_t rank = 0, int64_t world = 1);

  MlmBatch next();  // wraps into the next epoch (reshuffled) when the data runs out
  LoaderCursor cursor() const { return cursor_; }
  void restore(const LoaderCursor& c);
  int64_t sequences() const { return data_->size(); }

 private:
  void reshuffle();
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
  std::vector<int64_t> order_;
};

}  // namespace rpe
