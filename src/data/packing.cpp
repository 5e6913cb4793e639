// RoBERTa-style sequence packing.
#include "data/packing.h"

#include <algorithm>

namespace rpe {

int64_t PackedSequences::real_tokens() const {
  return static_cast<int64_t>(std::count_if(tokens.begin(), tokens.end(), [](int32_t t) { return t != 0; }));
}

PackedSequences pack_documents(const std::vector<Document>& docs, const Tokenizer& tok, int64_t seq_len,
                               bool cross_documents) {
  const auto& sp = tok.special();
  PackedSequences out;
  out.seq_len = seq_len;
  const int64_t room = seq_len - 2;  // [CLS] ... [SEP]
  std::vector<int32_t> ids;
  std::vector<uint8_t> starts;

  auto flush = [&] {
    if (ids.empty()) return;
    out.tokens.push_back(sp.cls);
    out.word_start.push_back(0);
    out.tokens.insert(out.tokens.end(), ids.begin(), ids.end());
    out.word_start.insert(out.word_start.end(), starts.begin(), starts.end());
    out.tokens.push_back(sp.sep);
    out.word_start.push_back(0);
    const int64_t pad = seq_len - 2 - static_cast<int64_t>(ids.size());
    out.tokens.insert(out.tokens.end(), pad, sp.pad);
    out.word_start.insert(out.word_start.end(), pad, 0);
    ids.clear();
    starts.clear();
  };

  for (const auto& doc : docs) {
    for (const auto& sentence : doc.sentences) {
      Encoding enc = tok.encode(sentence);
      size_t pos = 0;
      while (pos < enc.ids.size()) {
        const int64_t left = room - static_cast<int64_t>(ids.size());
        const int64_t remaining = static_cast<int64_t>(enc.ids.size() - pos);
        // Start a new sequence rather than split a sentence that would fit in an empty one.
        if (remaining > left && remaining <= room && !ids.empty()) {
          flush();
          continue;
        }
        const int64_t take = std::min(left, remaining);
        ids.insert(ids.end(), enc.ids.begin() + pos, enc.ids.begin() + pos + take);
        starts.insert(starts.end(), enc.word_start.begin() + pos, enc.word_start.begin() + pos + take);
        pos += static_cast<size_t>(take);
        if (static_cast<int64_t>(ids.size()) == room) flush();
      }
    }
    if (!cross_documents) {
      flush();
    } else if (!ids.empty()) {
      if (static_cast<int64_t>(ids.size()) + 1 >= room) {
        flush();
      } else {
        ids.push_back(sp.sep);  // document boundary inside a sequence
        starts.push_back(0);
      }
    }
  }
  flush();
  return out;
}

}  // namespace rpe
