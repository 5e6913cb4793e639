#include "util/cpu_memory.h"

#include <ATen/Context.h>
#include <malloc.h>

namespace rpe {

void keep_freed_host_memory() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);  // glibc's upper bound for the threshold on 64-bit
  mallopt(M_TRIM_THRESHOLD, 1 << 30);           // return memory to the OS only above 1 GiB free at the top
#endif
}

bool flush_denormals() { return at::globalContext().setFlushDenormal(true); }

}  // namespace rpe
