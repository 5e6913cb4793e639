// Sequence packing over token streams (rules in packing.h).
#include "data/packing.h"

#include <algorithm>

#include "util/errors.h"

namespace rpe {

int64_t PackedSequences::real_tokens() const {
  return static_cast<int64_t>(std::count_if(tokens.begin(), tokens.end(), [&](int32_t t) { return t != pad; }));
}

void PackedSequences::read(int64_t i, int32_t* out_tokens, uint8_t* out_word_start) const {
  std::copy_n(tokens.data() + i * seq_len, seq_len, out_tokens);
  std::copy_n(word_start.data() + i * seq_len, seq_len, out_word_start);
}

namespace {
// Fills one sequence at a time; flush() closes it with [SEP] and pads to L.
class Packer {
 public:
  Packer(const SpecialIds& sp, int64_t seq_len, Packing packing)
      : sp_(sp), room_(seq_len - 2), cross_(packing != Packing::doc_sentences), split_(packing == Packing::contiguous) {
    out_.seq_len = seq_len;
    out_.pad = sp.pad;
  }

  void add(const TokenStream& s) {
    for (int64_t d = 0; d < s.documents; ++d) {
      const int64_t s0 = s.document_begin(d), s1 = static_cast<int64_t>(s.document_ends[d]);
      for (int64_t k = s0; k < s1; ++k) add_sentence(s, s.sentence_begin(k), static_cast<int64_t>(s.sentence_ends[k]));
      end_document();
    }
  }

  PackedSequences finish() {
    flush();
    return std::move(out_);
  }

 private:
  void add_sentence(const TokenStream& s, int64_t pos, int64_t end) {
    while (pos < end) {
      const int64_t left = room_ - static_cast<int64_t>(ids_.size());
      const int64_t remaining = end - pos;
      // Start a new sequence rather than split a sentence that would fit in an empty one.
      if (!split_ && remaining > left && remaining <= room_ && !ids_.empty()) {
        flush();
        continue;
      }
      const int64_t take = std::min(left, remaining);
      for (int64_t i = pos; i < pos + take; ++i) {
        ids_.push_back(s.id(i));
        starts_.push_back(s.word_start(i) ? 1 : 0);
      }
      pos += take;
      if (static_cast<int64_t>(ids_.size()) == room_) flush();
    }
  }

  void end_document() {
    if (!cross_) {
      flush();
    } else if (!ids_.empty()) {
      if (static_cast<int64_t>(ids_.size()) + 1 >= room_) {
        flush();
      } else {
        ids_.push_back(sp_.sep);  // document boundary inside a sequence
        starts_.push_back(0);
      }
    }
  }

  void flush() {
    if (ids_.empty()) return;
    out_.tokens.push_back(sp_.cls);
    out_.word_start.push_back(0);
    out_.tokens.insert(out_.tokens.end(), ids_.begin(), ids_.end());
    out_.word_start.insert(out_.word_start.end(), starts_.begin(), starts_.end());
    out_.tokens.push_back(sp_.sep);
    out_.word_start.push_back(0);
    const int64_t pad = room_ - static_cast<int64_t>(ids_.size());
    out_.tokens.insert(out_.tokens.end(), pad, sp_.pad);
    out_.word_start.insert(out_.word_start.end(), pad, 0);
    ids_.clear();
    starts_.clear();
  }

  SpecialIds sp_;
  int64_t room_;
  bool cross_;  // documents share sequences, a [SEP] between them
  bool split_;  // sentences are cut where a sequence is full
  std::vector<int32_t> ids_;
  std::vector<uint8_t> starts_;
  PackedSequences out_;
};
}  // namespace

PackedSequences pack_streams(const std::vector<TokenStream>& streams, const SpecialIds& special, int64_t seq_len,
                             Packing packing) {
  require(seq_len >= 3, "max_seq_len must leave room for [CLS] and [SEP]");
  Packer packer(special, seq_len, packing);
  for (const auto& s : streams) packer.add(s);
  return packer.finish();
}

PackedSequences pack_documents(const std::vector<Document>& docs, const Tokenizer& tok, int64_t seq_len,
                               Packing packing) {
  ShardBuilder builder;
  std::vector<Encoding> sentences;
  for (const auto& doc : docs) {
    sentences.clear();
    for (const auto& sentence : doc.sentences) sentences.push_back(tok.encode_corpus(sentence));
    builder.add_document(sentences);
  }
  return pack_streams({builder.view()}, tok.special(), seq_len, packing);
}

}  // namespace rpe
