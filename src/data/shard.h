// Token shards: the versioned, memory-mapped on-disk form of a tokenized corpus that
// prepare-data writes and training reads. Little-endian layout, version 1:
//
//   offset  bytes  field
//        0      8  magic "RPESHARD"
//        8      4  version (1)
//       12      4  id_bytes: 2 (uint16 ids, vocabularies up to 65,536) or 4 (uint32)
//       16      8  vocab_size of the tokenizer that wrote it
//       24      8  tokens N
//       32      8  sentences S
//       40      8  documents D
//       48      8  words W (tokens that start a word)
//       56      8  reserved (0)
//       64         ids [N] x id_bytes                       (zero-padded to a multiple of 8)
//                  word_start bits [ceil(N/8)], bit i%8 of byte i/8 is token i (padded to 8)
//                  sentence_ends [S] uint64: token index one past each sentence
//                  document_ends [D] uint64: sentence index one past each document
//
// A file whose size differs from the one the header implies is rejected as truncated.
// Opening checks only the header and the size (O(1), cheap on every start); verify() reads the
// whole file once: its checksum (shard_checksum, recorded in the manifest) and every id and
// boundary. A bit flip anywhere changes the checksum.
#pragma once
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "data/tokenizer.h"

namespace rpe {

inline constexpr char kShardMagic[8] = {'R', 'P', 'E', 'S', 'H', 'A', 'R', 'D'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr size_t kShardHeaderBytes = 64;

// Checksum of a shard file's bytes: 64-bit words folded in by a bijective mix per word, so
// changing any one word (a bit flip) always changes the result. Shards are multiples of 8 bytes.
class ShardHasher {
 public:
  void update(const void* data, size_t bytes);  // bytes need not be a multiple of 8
  uint64_t value() const;                      // of all bytes so far (tail zero-padded)

 private:
  uint64_t h_ = 0x243F6A8885A308D3ULL, tail_ = 0;
  size_t tail_bytes_ = 0;
  uint64_t total_ = 0;
  void mix(uint64_t w);
};

// Drops the pages holding [data, data + bytes) of a read-only file mapping from the process's
// resident set: the page cache keeps them (shared, reclaimable) and a later read maps them
// again. Whole pages around the range are dropped, so only for read-only (unmodified) maps.
void release_mapped(const void* data, size_t bytes);
// mmap(PROT_READ, MAP_PRIVATE) of a whole file, placed so that the kernel never maps 2 MB of it
// at one fault (see shard.cpp). MAP_FAILED on failure; munmap(map, bytes) releases it.
void* map_off_huge_boundary(int fd, size_t bytes);

// Scans of whole mapped files (verification, index build, index checksum) go in pieces of
// this many bytes, each released after use, so that a start's resident set does not grow
// with the corpus (file-backed pages count in a process's RSS and peak RSS like its heap).
inline constexpr size_t kScanBytes = size_t{1} << 20;

// Calls visit(i, j) on consecutive ranges [i, j) covering [0, n) of the array of n elements
// of `elem_bytes` bytes at `data` (in a read-only map), kScanBytes at a time, releasing each
// range's pages after its visit.
template <class Visit>
void scan_mapped(const void* data, int64_t n, size_t elem_bytes, Visit visit) {
  const int64_t step = static_cast<int64_t>(std::max<size_t>(1, kScanBytes / elem_bytes));
  for (int64_t i = 0; i < n; i += step) {
    const int64_t j = std::min(n, i + step);
    visit(i, j);
    release_mapped(static_cast<const char*>(data) + static_cast<size_t>(i) * elem_bytes,
                   static_cast<size_t>(j - i) * elem_bytes);
  }
}

struct ShardFileInfo {
  uint64_t bytes = 0, checksum = 0;
};

// Read-only view of a tokenized stream (an open shard or an in-memory builder).
struct TokenStream {
  const void* ids = nullptr;
  uint32_t id_bytes = 4;
  const uint8_t* word_bits = nullptr;
  const uint64_t* sentence_ends = nullptr;
  const uint64_t* document_ends = nullptr;
  int64_t tokens = 0, sentences = 0, documents = 0;

  int32_t id(int64_t i) const {
    return id_bytes == 2 ? static_cast<const uint16_t*>(ids)[i] : static_cast<int32_t>(static_cast<const uint32_t*>(ids)[i]);
  }
  bool word_start(int64_t i) const { return (word_bits[i >> 3] >> (i & 7)) & 1; }
  int64_t sentence_begin(int64_t s) const { return s == 0 ? 0 : static_cast<int64_t>(sentence_ends[s - 1]); }
  int64_t document_begin(int64_t d) const { return d == 0 ? 0 : static_cast<int64_t>(document_ends[d - 1]); }
};

// Accumulates documents in memory; writes them as one shard file.
class ShardBuilder {
 public:
  // Adds one document from its sentences' encodings (empty sentences are dropped; a
  // document with no tokens at all is dropped).
  void add_document(const std::vector<Encoding>& sentences);
  // Adds one document from flat ids/word starts and per-sentence token counts.
  void add_document(const int32_t* ids, const uint8_t* word_start, const std::vector<int64_t>& sentence_lengths);
  void add_document(const int32_t* ids, const uint8_t* word_start, const int64_t* sentence_lengths, size_t sentences);
  int64_t tokens() const { return static_cast<int64_t>(ids_.size()); }
  int64_t documents() const { return static_cast<int64_t>(document_ends_.size()); }
  int64_t words() const { return words_; }
  TokenStream view() const;
  // Writes the shard atomically; returns its size in bytes and checksum.
  ShardFileInfo write(const std::filesystem::path& file, int64_t vocab_size) const;
  void clear();

 private:
  std::vector<uint32_t> ids_;
  std::vector<uint8_t> word_bits_;
  std::vector<uint64_t> sentence_ends_, document_ends_;
  int64_t words_ = 0;
};

// A shard file mapped into memory (read-only). Opening validates magic, version, id size
// and the file size; verify() everything else. A problem is a UserError naming the file.
class MappedShard {
 public:
  explicit MappedShard(const std::filesystem::path& file);
  ~MappedShard();
  MappedShard(const MappedShard&) = delete;
  MappedShard& operator=(const MappedShard&) = delete;
  const TokenStream& stream() const { return stream_; }
  int64_t vocab_size() const { return vocab_size_; }
  int64_t words() const { return words_; }
  const std::filesystem::path& file() const { return file_; }
  uint64_t bytes() const { return bytes_; }
  // Reads the whole file: checksum (compared when `expected` is given), ids inside the
  // vocabulary, increasing sentence and document boundaries. Returns the checksum.
  uint64_t verify(const uint64_t* expected = nullptr) const;
  // Drops the file's pages from this process's resident set (release_mapped).
  void release_pages() const { release_mapped(map_, bytes_); }

 private:
  std::filesystem::path file_;
  void* map_ = nullptr;
  size_t bytes_ = 0;
  TokenStream stream_;
  int64_t vocab_size_ = 0, words_ = 0;
};

}  // namespace rpe
