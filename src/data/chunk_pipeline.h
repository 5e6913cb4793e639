// The parallel core of prepare-data: a file's chunks (text_reader.h) are read, tokenized on
// several threads and committed in file order, without a barrier between batches of chunks.
// Every thread runs the same loop and takes the first step that is possible:
//   1. commit the next chunk in file order, if it is tokenized and no thread is committing;
//   2. read the next chunk, if no thread is reading and fewer than `window` chunks are in
//      flight (read, not yet committed), then tokenize it: the parallel part;
//   3. otherwise wait.
// Reading (I/O, decompression, cutting at document ends) and committing (copying into the
// shard builder, writing full shards with their checksums) thus run on one thread at a time,
// in order, while the other threads tokenize: they leave the critical path, where a batch
// barrier put them (read a batch, tokenize it, wait for its slowest chunk, write it). With one
// thread this is the plain sequential loop. Memory: at most `window` chunks (text and tokens)
// in flight, their buffers reused from chunk to chunk.
// Errors keep file order: an exception from reading, tokenizing or committing chunk k is
// thrown (once every thread has stopped) as the error of chunk k, and no chunk after it is
// committed, whatever the thread count.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "data/text_reader.h"

namespace rpe {

// Tokenized documents of one chunk.
struct ChunkResult {
  std::vector<int32_t> ids;
  std::vector<uint8_t> starts;            // word starts, one per id
  std::vector<int64_t> sentence_lengths;  // per sentence, all documents concatenated
  std::vector<int64_t> doc_sentences;     // sentences per document
  size_t bad_utf8 = std::string_view::npos;  // offset within the chunk
  void clear();  // (keeps the capacity for the next chunk)
};

// Where the threads' time went, summed over threads (seconds): how far the run was from
// threads x wall of tokenizing. `wait` is time blocked with nothing to do.
struct PipelineTimes {
  double read = 0, tokenize = 0, commit = 0, wait = 0;
  PipelineTimes& operator+=(const PipelineTimes& o);
};

struct ChunkPipeline {
  int threads = 1;
  size_t window = 4;  // chunks in flight at most (>= threads to keep every thread busy)
  // Fills `out` (cleared) from one chunk of whole documents; called on any thread.
  std::function<void(std::string_view text, ChunkResult& out)> tokenize;
  // Receives the chunks in file order, one call at a time; `offset`: of the chunk's first
  // byte in the (decompressed) file.
  std::function<void(const ChunkResult& chunk, uint64_t offset)> commit;
};

// Runs `p` over every chunk of `reader`; rethrows the first error in file order.
PipelineTimes run_chunk_pipeline(ChunkReader& reader, const ChunkPipeline& p);

}  // namespace rpe
