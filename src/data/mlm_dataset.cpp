// Deterministic, resumable MLM batch loader.
#include "data/mlm_dataset.h"

#include <numeric>

#include "util/errors.h"

namespace rpe {

MlmLoader::MlmLoader(std::shared_ptr<const PackedSequences> data, const Tokenizer& tok, MaskingOptions masking,
                     int64_t batch_size, uint64_t seed, bool shuffle, int64_t rank, int64_t world)
    : data_(std::move(data)),
      special_(tok.special()),
      first_regular_(tok.first_regular_id()),
      vocab_(tok.vocab_size()),
      masking_(masking),
      batch_size_(batch_size),
      seed_(seed),
      shuffle_(shuffle),
      rank_(rank),
      world_(world) {
  require(data_->size() > 0, "no training sequences: the corpus produced no tokens");
  reshuffle();
}

void MlmLoader::reshuffle() {
  order_.resize(static_cast<size_t>(data_->size()));
  std::iota(order_.begin(), order_.end(), 0);
  if (!shuffle_) return;
  SplitMix64 rng(masking_seed(seed_ ^ 0x5EED5EEDULL, static_cast<uint64_t>(cursor_.epoch), 0));
  for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[rng.below(i)]);
}

void MlmLoader::restore(const LoaderCursor& c) {
  cursor_ = c;
  reshuffle();
}

MlmBatch MlmLoader::next() {
  const int64_t L = data_->seq_len;
  const int64_t B = batch_size_;
  auto ids = torch::empty({B, L}, torch::kLong);
  auto labels = torch::empty({B, L}, torch::kLong);
  int64_t* ids_p = ids.data_ptr<int64_t>();
  int64_t* lab_p = labels.data_ptr<int64_t>();
  auto padding = torch::empty({B, L}, torch::kBool);
  bool* pad_p = padding.data_ptr<bool>();
  int64_t tokens = 0;
  // The global batch is world*B sequences; this rank takes every world-th one.
  for (int64_t b = 0; b < B; ++b) {
    const int64_t global = cursor_.position + b * world_ + rank_;
    int64_t epoch = cursor_.epoch, pos = global;
    const int64_t n = static_cast<int64_t>(order_.size());
    std::vector<int64_t> other;  // batch crosses the epoch end: use the next epoch's order
    if (pos >= n) {
      LoaderCursor saved = cursor_;
      cursor_.epoch += pos / n;
      reshuffle();
      other = order_;
      cursor_ = saved;
      reshuffle();
      epoch += pos / n;
      pos %= n;
    }
    const int64_t seq = other.empty() ? order_[pos] : other[pos];
    const int32_t* tok = data_->tokens.data() + seq * L;
    const uint8_t* ws = data_->word_start.data() + seq * L;
    mask_sequence(tok, ws, L, special_, first_regular_, vocab_, masking_,
                  masking_seed(seed_, static_cast<uint64_t>(epoch), static_cast<uint64_t>(seq)), ids_p + b * L,
                  lab_p + b * L);
    for (int64_t i = 0; i < L; ++i) {
      pad_p[b * L + i] = tok[i] == special_.pad;
      tokens += tok[i] != special_.pad;
    }
  }
  cursor_.position += B * world_;
  if (cursor_.position >= static_cast<int64_t>(order_.size())) {
    cursor_.epoch += cursor_.position / static_cast<int64_t>(order_.size());
    cursor_.position %= static_cast<int64_t>(order_.size());
    reshuffle();
  }
  return {ids, labels, padding, tokens};
}

}  // namespace rpe
