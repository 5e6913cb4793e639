// Host allocator tuning for CPU training.
#pragma once

namespace rpe {

// LibTorch's CPU allocator is glibc malloc, which serves blocks above its mmap threshold
// (128 KiB, growing to at most 32 MiB) with fresh mmaps and unmaps them on free: every
// training step then page-faults and zeroes its [B, H, L, L] activations anew (measured:
// 10-20% of a BERT-base layer's CPU step at L = 512, bench/results/attention_cpu.md).
// Raising the threshold to its maximum and never trimming keeps freed blocks for reuse, as
// a caching allocator would. Call once at startup; no effect on memory held by CUDA.
void keep_freed_host_memory();

}  // namespace rpe
