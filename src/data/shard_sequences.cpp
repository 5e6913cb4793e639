// Lazy packed sequences over memory-mapped shards; see shard_sequences.h.
#include "data/shard_sequences.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>

#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/log.h"

namespace rpe {
namespace fs = std::filesystem;

namespace {
constexpr char kIndexMagic[8] = {'R', 'P', 'E', 'I', 'N', 'D', 'E', 'X'};
constexpr uint64_t kIndexVersion = 2;  // 1: real_tokens outside the checksum (rebuilt on sight)
struct IndexHeader {
  char magic[8];
  // packing: 0 doc_sentences, 1 full_sentences, 2 contiguous; checksum: of the starts that
  // follow, then real_tokens (the one field not checked against the run's own values)
  uint64_t version, key, seq_len, packing, count, real_tokens, checksum;
};
static_assert(sizeof(IndexHeader) == 64);

// The packing decisions of packing.cpp's Packer, on lengths only: where each sequence
// starts in the token stream (appended to `starts`; null = only count them in sequences()).
// Kept in step with Packer by the tests (token-for-token equality).
class Planner {
 public:
  Planner(int64_t room, Packing packing, std::vector<uint64_t>* starts)
      : room_(room), cross_(packing != Packing::doc_sentences), split_(packing == Packing::contiguous), starts_(starts) {}
  void sentence(int64_t len) {
    while (len > 0) {
      const int64_t left = room_ - count_;
      if (!split_ && len > left && len <= room_ && count_ > 0) {  // start a new sequence rather than split
        flush();
        continue;
      }
      const int64_t take = std::min(left, len);
      if (count_ == 0) start_ = pos_;
      count_ += take, pos_ += take, len -= take;
      if (count_ == room_) flush();
    }
  }
  void document_end() {
    if (!cross_) flush();
    else if (count_ > 0) {
      if (count_ + 1 >= room_) flush();
      else ++count_;  // the [SEP] between documents
    }
  }
  void flush() {
    if (count_ == 0) return;
    if (starts_) starts_->push_back(start_);
    ++sequences_;
    real_ += count_ + 2;  // + [CLS] and [SEP]
    count_ = 0;
  }
  int64_t real() const { return real_; }
  int64_t sequences() const { return sequences_; }
  uint64_t pos() const { return pos_; }

 private:
  int64_t room_;
  bool cross_, split_;
  std::vector<uint64_t>* starts_;
  int64_t count_ = 0, real_ = 0, sequences_ = 0;
  uint64_t pos_ = 0, start_ = 0;
};

// The cache's checksum, after `sum` has taken the starts (whole, or in the pieces a scan reads):
// the token count too, so that a flipped byte anywhere but in the checked fields is caught.
uint64_t index_checksum(ShardHasher sum, const IndexHeader& h) {
  sum.update(&h.real_tokens, sizeof h.real_tokens);
  return sum.value();
}

uint64_t packing_code(Packing p) { return static_cast<uint64_t>(p); }  // IndexHeader::packing

uint64_t cache_key(const fs::path& dir, bool valid, int64_t seq_len, Packing packing) {
  const std::string m = read_file(dir / "manifest.json");
  ShardHasher h;
  h.update(m.data(), m.size());
  const uint64_t extra[3] = {valid ? 1u : 0u, static_cast<uint64_t>(seq_len), packing_code(packing)};
  h.update(extra, sizeof extra);
  return h.value();
}
}  // namespace

std::string ShardSequences::index_cache_name(bool valid, int64_t seq_len, Packing packing) {
  const char* suffix = packing == Packing::doc_sentences ? "-doc" : packing == Packing::full_sentences ? "-full" : "-contiguous";
  return "index-v" + std::to_string(kIndexVersion) + (valid ? "-valid" : "-train") + "-L" + std::to_string(seq_len) +
         suffix + ".bin";
}

ShardSequences::ShardSequences(std::shared_ptr<const PreparedShards> shards, bool valid, const fs::path& dir,
                               const SpecialIds& special, int64_t seq_len, Packing packing)
    : shards_(std::move(shards)),
      files_(valid ? &shards_->valid : &shards_->train),
      special_(special), seq_len_(seq_len), room_(seq_len - 2), packing_(packing),
      cross_(packing != Packing::doc_sentences) {
  require(seq_len >= 3, "max_seq_len must leave room for [CLS] and [SEP]");
  streams_ = PreparedShards::streams(*files_);
  shard_begin_.push_back(0);
  for (const auto& s : streams_) shard_begin_.push_back(shard_begin_.back() + s.tokens);
  const std::string name = index_cache_name(valid, seq_len, packing);
  const uint64_t key = cache_key(dir, valid, seq_len, packing);
  if (map_cache(dir / name, key)) return;
  build_index(owned_);
  count_ = static_cast<int64_t>(owned_.size()) - 1;
  starts_ = owned_.data();
  write_cache(dir / name, key, owned_);
  // Read the index through the cache's map from now on: file-backed pages, shared by the ranks
  // of a node and reclaimable, instead of 8 bytes per sequence of this process's heap.
  if (map_cache(dir / name, key)) {
    std::vector<uint64_t>().swap(owned_);
    from_cache_ = false;  // computed at this start all the same
  }
}

void ShardSequences::release_pages() const {
  for (const auto& f : *files_) f->release_pages();
  if (map_) release_mapped(map_, map_bytes_);
}

ShardSequences::~ShardSequences() {
  if (map_) ::munmap(map_, map_bytes_);
}

void ShardSequences::build_index(std::vector<uint64_t>& starts) {
  // Two passes over the (memory-mapped) lengths: count, then fill a vector of exactly that size,
  // so the build peaks at 8 bytes per sequence (a growing vector would reach 24 while it copies).
  // The boundaries are read through the shards' maps in pieces of ~kScanBytes of sentence
  // ends, released after use: the scan adds nothing to the resident set that grows with the
  // corpus (only the index itself does, 8 bytes per sequence).
  auto plan_all = [this](std::vector<uint64_t>* out) {
    Planner plan(room_, packing_, out);
    for (size_t f = 0; f < streams_.size(); ++f) {
      const TokenStream& s = streams_[f];
      for (int64_t d0 = 0, d = 0; d < s.documents; ++d) {
        const int64_t s1 = static_cast<int64_t>(s.document_ends[d]);
        for (int64_t k = s.document_begin(d); k < s1; ++k)
          plan.sentence(static_cast<int64_t>(s.sentence_ends[k]) - s.sentence_begin(k));
        plan.document_end();
        const int64_t k0 = s.document_begin(d0);
        if (d + 1 == s.documents || static_cast<size_t>(s1 - k0) * 8 >= kScanBytes) {
          release_mapped(s.sentence_ends + k0, static_cast<size_t>(s1 - k0) * 8);
          release_mapped(s.document_ends + d0, static_cast<size_t>(d + 1 - d0) * 8);
          d0 = d + 1;
        }
      }
      (*files_)[f]->release_pages();  // what the kernel mapped around the pieces' ends
    }
    plan.flush();
    if (out) out->push_back(plan.pos());  // end of the last sequence
    return plan;
  };
  starts.reserve(static_cast<size_t>(plan_all(nullptr).sequences()) + 1);
  real_tokens_ = plan_all(&starts).real();
}

bool ShardSequences::map_cache(const fs::path& file, uint64_t key) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_NONBLOCK);  // a FIFO there must not block
  if (fd < 0) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {  // not a cache: built anew, written over it
    ::close(fd);
    return false;
  }
  const size_t bytes = static_cast<size_t>(st.st_size);
  void* map = bytes >= sizeof(IndexHeader) ? map_off_huge_boundary(fd, bytes) : MAP_FAILED;
  ::close(fd);
  if (map == MAP_FAILED) return false;
  IndexHeader h;
  std::memcpy(&h, map, sizeof h);
  bool ok = std::memcmp(h.magic, kIndexMagic, 8) == 0 && h.version == kIndexVersion && h.key == key &&
            h.seq_len == static_cast<uint64_t>(seq_len_) && h.packing == packing_code(packing_) &&
            bytes == sizeof h + 8 * (h.count + 1);
  if (ok) {  // the checksum, read in released pieces: the loader maps the pages it needs later
    const auto* starts = reinterpret_cast<const uint64_t*>(static_cast<const char*>(map) + sizeof h);
    ShardHasher sum;
    scan_mapped(starts, static_cast<int64_t>(h.count + 1), 8,
                [&](int64_t i, int64_t j) { sum.update(starts + i, static_cast<size_t>(j - i) * 8); });
    ok = index_checksum(sum, h) == h.checksum;
    release_mapped(map, bytes);
  }
  if (!ok) {  // stale, foreign or corrupt: rebuilt and replaced
    ::munmap(map, bytes);
    return false;
  }
  map_ = map, map_bytes_ = bytes;
  starts_ = reinterpret_cast<const uint64_t*>(static_cast<const char*>(map) + sizeof h);
  count_ = static_cast<int64_t>(h.count);
  real_tokens_ = static_cast<int64_t>(h.real_tokens);
  from_cache_ = true;
  return true;
}

void ShardSequences::write_cache(const fs::path& file, uint64_t key, const std::vector<uint64_t>& starts) const {
  IndexHeader h{};
  std::memcpy(h.magic, kIndexMagic, 8);
  h.version = kIndexVersion, h.key = key, h.seq_len = static_cast<uint64_t>(seq_len_), h.packing = packing_code(packing_);
  h.count = starts.size() - 1, h.real_tokens = static_cast<uint64_t>(real_tokens_);
  ShardHasher sum;
  sum.update(starts.data(), starts.size() * sizeof(uint64_t));
  h.checksum = index_checksum(sum, h);
  try {  // every rank may get here at once: each writes a temp file and renames it over the same content
    write_atomic_with(file, [&](const fs::path& tmp) {
      std::ofstream out(tmp, std::ios::binary);
      out.write(reinterpret_cast<const char*>(&h), sizeof h);
      out.write(reinterpret_cast<const char*>(starts.data()), static_cast<std::streamsize>(starts.size() * 8));
      if (!out.flush()) throw UserError(file.string() + ": cannot write");
    });
  } catch (const std::exception& e) {  // a read-only folder: the index is rebuilt at every start
    log::warn("data", "cannot cache the sample index ({}); it is rebuilt at every start", e.what());
  }
}

void ShardSequences::read(int64_t i, int32_t* tokens, uint8_t* word_start) const {
  const int64_t a = static_cast<int64_t>(starts_[i]), b = static_cast<int64_t>(starts_[i + 1]);
  int64_t k = 0;  // next output slot
  tokens[k] = special_.cls, word_start[k++] = 0;
  size_t s = static_cast<size_t>(std::upper_bound(shard_begin_.begin(), shard_begin_.end(), a) - shard_begin_.begin() - 1);
  for (int64_t g = a; g < b; ++s) {  // g: stream offset of the next token; one shard per pass
    const TokenStream& st = streams_[s];
    const int64_t base = shard_begin_[s];
    // First document of this shard that ends after g.
    auto doc_end = [&](int64_t d) { return static_cast<int64_t>(st.sentence_ends[st.document_ends[d] - 1]); };
    int64_t lo = 0, hi = st.documents;
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (doc_end(mid) > g - base) hi = mid;
      else lo = mid + 1;
    }
    for (int64_t d = lo; d < st.documents && g < b; ++d) {
      const int64_t end = std::min(b, base + doc_end(d));
      for (; g < end; ++g) tokens[k] = st.id(g - base), word_start[k++] = st.word_start(g - base) ? 1 : 0;
      // A document ends at g: [SEP] if cross-document packing put one there (inside the range
      // always; at its very end only if it fit, as Packer::end_document decides).
      const bool at_end = g == base + doc_end(d);
      if (cross_ && at_end && (g < b || k < room_)) tokens[k] = special_.sep, word_start[k++] = 0;  // k - 1 + 1 < room
    }
    // The search and the copy faulted in ~10 windows of 64 KB of this shard: drop them now, so a
    // batch in the making holds one sequence's pages, not B of them.
    (*files_)[s]->release_pages();
  }
  tokens[k] = special_.sep, word_start[k++] = 0;
  for (; k < seq_len_; ++k) tokens[k] = special_.pad, word_start[k] = 0;
}

}  // namespace rpe
