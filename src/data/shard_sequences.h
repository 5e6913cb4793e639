// Packed MLM sequences read lazily from memory-mapped shards. Every packing (packing.h:
// whole sentences or contiguous cuts, [SEP] between documents but with doc_sentences) consumes
// the token stream of the shards contiguously, so sequence i is the token range [start_i, start_{i+1}) of that
// stream plus derived specials: [CLS] first, a [SEP] after each document end inside the
// range (and after one at its very end when the packer had room for it), the closing [SEP],
// then [PAD]. The sample index is therefore N+1 uint64 stream offsets: 8 bytes per sequence.
// It is computed once from the sentence and document boundaries (no token is read), streamed
// into its cache file beside the shards, index-v<format>-<split>-L<L>-<doc|full|contiguous>.bin,
// keyed by the manifest's checksum (a shard folder this process cannot write: the same file,
// prefixed by the key, in the cache folder of cache_dir.h); a later start maps it. The format
// version is in the name, so binaries of two versions sharing a shard folder each keep their
// own cache instead of rebuilding and replacing the other's at every start. Tokens are read
// from the shards' memory maps on demand.
// Memory: the index (8 bytes per sequence, in its file's map; on the heap only where no cache
// file can be written at all) is all that grows with the corpus. Whole-file scans (verification, index build, index
// checksum) release their pages as they go; each read() drops the shard pages it touched (the
// kernel maps 64 KB, or a folio of up to 2 MB, around each fault) and release_pages() (the
// loader, per batch) the index map's too, so the file-backed part of a rank's RSS stays at
// about one sequence's pages, not the corpus it has read.
#pragma once
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data/prepare.h"
#include "data/sequences.h"

namespace rpe {

class ShardSequences : public SequenceSource {
 public:
  // `shards`: an opened prepared folder (kept alive); `valid` picks the split.
  ShardSequences(std::shared_ptr<const PreparedShards> shards, bool valid, const std::filesystem::path& dir,
                 const SpecialIds& special, int64_t seq_len, Packing packing);
  ~ShardSequences() override;

  int64_t size() const override { return count_; }
  int64_t length() const override { return seq_len_; }
  int64_t real_tokens() const override { return real_tokens_; }
  void read(int64_t i, int32_t* tokens, uint8_t* word_start) const override;
  void release_pages() const override;  // this split's shard maps and the index map
  bool index_from_cache() const { return from_cache_; }  // false: computed at this start
  size_t index_heap_bytes() const { return owned_.capacity() * sizeof(uint64_t); }  // 0 unless no cache file could be written
  // The cache's file name in the shards folder (index-v2-train-L512-doc.bin).
  static std::string index_cache_name(bool valid, int64_t seq_len, Packing packing);

 private:
  void build_index(std::vector<uint64_t>& starts);  // in memory: only where no cache file can be written
  bool map_cache(const std::filesystem::path& file, uint64_t key);
  // Builds the cache `file` (under its lock) and maps it; false where it cannot be written here
  // or another process's build failed to write it moments ago (the note in shard_sequences.cpp).
  bool build_cache(const std::filesystem::path& file, uint64_t key);
  bool write_index(const std::filesystem::path& file, uint64_t key);  // streamed; false if it cannot be written

  std::shared_ptr<const PreparedShards> shards_;
  const std::vector<std::unique_ptr<MappedShard>>* files_;  // this split's shards, in shards_
  std::vector<TokenStream> streams_;
  std::vector<int64_t> shard_begin_;  // [shards + 1] stream offset of each shard's first token
  SpecialIds special_;
  int64_t seq_len_, room_;
  Packing packing_;
  bool cross_;  // a [SEP] between documents inside a sequence
  int64_t count_ = 0, real_tokens_ = 0;
  const uint64_t* starts_ = nullptr;  // [count_ + 1], in the cache's map or in owned_
  std::vector<uint64_t> owned_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  bool from_cache_ = false;
};

}  // namespace rpe
