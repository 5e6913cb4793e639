// Lazy packed sequences over memory-mapped shards; see shard_sequences.h.
#include "data/shard_sequences.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>

#include "data/cache_dir.h"
#include "data/manifest.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/file_lock.h"
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

// Where the Planner's sequence starts go: nowhere (counted only), appended to a vector (the
// in-memory index, when no cache file can be written), or streamed into an index file behind
// `header_words` words of room for its header, with their checksum: the index of a whole corpus
// never sits in this process's heap. A file is written in writes of 2 MB at 2 MB offsets: the
// page cache then holds it in 2 MB folios, which the map (one page off a 2 MB boundary:
// map_off_huge_boundary) faults in a window at a time. Smaller writes leave smaller folios,
// which the kernel maps whole at a fault: a batch's random look-ups then kept up to ~1 MB of
// the index each in this process's RSS (measured: 1 MB writes, +27 MB peak RSS at B = 32).
class StartSink {
 public:
  StartSink() = default;
  explicit StartSink(std::vector<uint64_t>* starts) : vec_(starts) {}
  StartSink(std::ostream* out, size_t header_words) : out_(out), buf_(header_words, 0), skip_(header_words) {
    buf_.reserve(kBuffer);
  }
  void push(uint64_t start) {
    ++count_;
    if (vec_) vec_->push_back(start);
    if (!out_) return;
    buf_.push_back(start);
    if (buf_.size() == kBuffer) flush();
  }
  void flush() {
    if (!out_ || buf_.empty()) return;
    out_->write(reinterpret_cast<const char*>(buf_.data()), static_cast<std::streamsize>(buf_.size() * 8));
    sum_.update(buf_.data() + skip_, (buf_.size() - skip_) * 8);
    buf_.clear();
    skip_ = 0;
  }
  uint64_t count() const { return count_; }
  const ShardHasher& sum() const { return sum_; }

 private:
  static constexpr size_t kBuffer = (size_t{2} << 20) / 8;  // words: 2 MB
  std::vector<uint64_t>* vec_ = nullptr;
  std::ostream* out_ = nullptr;
  std::vector<uint64_t> buf_;
  size_t skip_ = 0;  // leading words of buf_ that are the header's room, not starts
  ShardHasher sum_;
  uint64_t count_ = 0;
};

// The packing decisions of packing.cpp's Packer, on lengths only: where each sequence
// starts in the token stream (to `starts`). Kept in step with Packer by the tests
// (token-for-token equality).
class Planner {
 public:
  Planner(int64_t room, Packing packing, StartSink* starts)
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
    starts_->push(start_);
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
  StartSink* starts_;
  int64_t count_ = 0, real_ = 0, sequences_ = 0;
  uint64_t pos_ = 0, start_ = 0;
};

// The packing over every boundary of `streams` (the shards `files`), starts to `sink`.
Planner plan_all(const std::vector<TokenStream>& streams, const std::vector<std::unique_ptr<MappedShard>>& files,
                 int64_t room, Packing packing, StartSink& sink) {
  // The boundaries are read through the shards' maps in pieces of ~kScanBytes of sentence
  // ends, released after use: the scan adds nothing to the resident set that grows with the corpus.
  Planner plan(room, packing, &sink);
  for (size_t f = 0; f < streams.size(); ++f) {
    const TokenStream& s = streams[f];
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
    files[f]->release_pages();  // what the kernel mapped around the pieces' ends
  }
  plan.flush();
  sink.push(plan.pos());  // end of the last sequence
  return plan;
}

// The cache's checksum, after `sum` has taken the starts (whole, or in the pieces a scan reads):
// the token count too, so that a flipped byte anywhere but in the checked fields is caught.
uint64_t index_checksum(ShardHasher sum, const IndexHeader& h) {
  sum.update(&h.real_tokens, sizeof h.real_tokens);
  return sum.value();
}

uint64_t packing_code(Packing p) { return static_cast<uint64_t>(p); }  // IndexHeader::packing

// A build that could not write its index (a full disk, an exceeded quota: write_index false, after
// a scan of the whole corpus) leaves this note in the index's lock file. The ranks waiting on the
// lock would otherwise each scan and fail the same way, one after another (64 scans in a row at
// the paper's scale) before falling back; with it, each goes straight to the next place (the
// cache folder; after a failure there, the heap). The note names the index's key, so a
// re-prepared folder's index is tried anew, and is honoured for kFailedBuildNoteLife after it was
// written (the lock file's mtime against this machine's clock; a note dated further ahead, a wrong
// clock, is ignored too); after that the next start tries beside the shards again (the disk may
// have been freed) and its successful build clears the note. The ranks of one start read it
// within seconds (they were waiting) or, those launched late, within a minute or two; a life too
// short costs such a rank a whole scan, one too long only sends a start after the disk was
// freed to the cache folder, where the failed start's index usually is already: minutes, then.
constexpr std::chrono::minutes kFailedBuildNoteLife{10};

std::string failed_build_note(uint64_t key) { return "index build failed: key " + manifest::hex64(key) + "\n"; }

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
  // The index is streamed into its cache file and read through the file's map: file-backed
  // pages, shared by the ranks of a node and reclaimable, never 8 bytes per sequence of heap.
  // Beside the shards when their folder is writable, else in the user's cache folder
  // (cache_dir.h), named by the key: a read-only dataset folder is indexed once, not at every start.
  if (map_cache(dir / name, key) || build_cache(dir / name, key)) return;
  if (const fs::path cache = fallback_cache_dir(); !cache.empty()) {
    const fs::path file = cache / (manifest::hex64(key) + "-" + name);
    if (map_cache(file, key)) return;
    if (build_cache(file, key)) {
      log::info("data", "{} is not writable: sample index cached as {}", dir.string(), file.string());
      return;
    }
  }
  log::warn("data", "cannot cache the sample index ({} nor the cache folder, RPE_TRAIN_CACHE_DIR, are writable): it "
            "is rebuilt at every start and held in memory, 8 bytes per sequence", dir.string());
  build_index(owned_);
  count_ = static_cast<int64_t>(owned_.size()) - 1;
  starts_ = owned_.data();
}

bool ShardSequences::build_cache(const fs::path& file, uint64_t key) {
  // The ranks of a first start (every rank of every node at once, on one shared folder) wait
  // for the one building it and map what it wrote, instead of each scanning every boundary of
  // the corpus and writing a copy of its own (64 x 280 MB at L = 128 and 4.5B tokens). Without
  // locks (a read-only folder, a file system without them) the build goes on unlocked: the
  // renames still leave one whole file, and no note is read or left (the ranks try at once, not in turn).
  FileLock lock(file.string() + ".lock", "waiting for another process building " + file.string());
  if (map_cache(file, key)) return true;  // another process built it while this one waited
  std::chrono::seconds age{};
  const std::string note = lock.note(&age);
  if (note == failed_build_note(key) && std::chrono::abs(age) < kFailedBuildNoteLife) {
    log::info("data", "{} could not be written by another process {} s ago: not tried again", file.string(),
              age.count());
    return false;
  }
  if (!write_index(file, key) || !map_cache(file, key)) {
    lock.leave_note(failed_build_note(key));  // best effort: a disk without a block left takes none
    return false;
  }
  if (!note.empty()) lock.leave_note("");  // an old note, or another key's
  from_cache_ = false;
  return true;
}

void ShardSequences::release_pages() const {
  for (const auto& f : *files_) f->release_pages();
  if (map_) release_mapped(map_, map_bytes_);
}

ShardSequences::~ShardSequences() {
  if (map_) ::munmap(map_, map_bytes_);
}

void ShardSequences::build_index(std::vector<uint64_t>& starts) {
  // Only where no cache file can be written. Two passes: count, then fill a vector of exactly
  // that size (a growing vector would reach 24 bytes per sequence while it copies).
  StartSink count;
  plan_all(streams_, *files_, room_, packing_, count);
  starts.reserve(static_cast<size_t>(count.count()));
  StartSink fill(&starts);
  real_tokens_ = plan_all(streams_, *files_, room_, packing_, fill).real();
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

bool ShardSequences::write_index(const fs::path& file, uint64_t key) {
  IndexHeader h{};
  std::memcpy(h.magic, kIndexMagic, 8);
  h.version = kIndexVersion, h.key = key, h.seq_len = static_cast<uint64_t>(seq_len_), h.packing = packing_code(packing_);
  try {  // every rank may get here at once: each writes a temp file and renames it over the same content
    write_atomic_with(file, [&](const fs::path& tmp) {
      std::ofstream out(tmp, std::ios::binary);
      if (!out.is_open()) throw UserError(file.string() + ": cannot write");  // before the scan, not after it
      StartSink sink(&out, sizeof h / 8);  // the header is written once the scan has counted
      real_tokens_ = plan_all(streams_, *files_, room_, packing_, sink).real();
      sink.flush();
      h.count = sink.count() - 1, h.real_tokens = static_cast<uint64_t>(real_tokens_);
      h.checksum = index_checksum(sink.sum(), h);
      out.seekp(0);
      out.write(reinterpret_cast<const char*>(&h), sizeof h);
      if (!out.flush()) throw UserError(file.string() + ": cannot write");
    });
    return true;
  } catch (const std::exception& e) {  // a read-only folder: the caller tries the next place
    log::debug("data", "cannot cache the sample index as {}: {}", file.string(), e.what());
    return false;
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
