// Host tuning for CPU training: the allocator and denormal floats.
#pragma once

namespace rpe {

// LibTorch's CPU allocator is glibc malloc, which serves blocks above its mmap threshold
// (128 KiB, growing to at most 32 MiB) with fresh mmaps and unmaps them on free: every
// training step then page-faults and zeroes its [B, H, L, L] activations anew (measured:
// 10-20% of a BERT-base layer's CPU step at L = 512, bench/results/attention_cpu.md).
// Raising the threshold to its maximum and never trimming keeps freed blocks for reuse, as
// a caching allocator would. Call once at startup; no effect on memory held by CUDA.
void keep_freed_host_memory();

// Flushes denormal floats to zero on the CPU (SSE FTZ/DAZ, torch.set_flush_denormal). ALiBi's
// and T5's large negative biases make softmax produce probabilities below fp32's smallest
// normal (exp(-88)); Intel cores take a microcode assist on every such operand, which made an
// ALiBi layer 1.35x absolute's CPU step at L = 512 (bench/results/attention_cpu.md) while the
// values themselves (< 1.2e-38) change nothing a model learns. Returns false where the CPU
// cannot (then nothing changes). Call once at startup, as keep_freed_host_memory.
bool flush_denormals();

}  // namespace rpe
