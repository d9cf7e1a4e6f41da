#pragma once
// Keeps freed memory in the process between simulations. A million-op evaluation allocates
// about 60 MB; with glibc's defaults every such block is a fresh mmap whose pages fault in on
// first touch, which costs as much as the simulation itself. Executables call this once.
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace pipescope {

inline void keepHeapWarm() {
#if defined(__GLIBC__)
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
}

} // namespace pipescope
