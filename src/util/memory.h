// Resident memory of this process from /proc (MB). reset_peak_rss() restarts the peak (VmHWM), so a
// phase of work can report its own peak.
#pragma once

#include <cstddef>

namespace xsa {

double rss_mb();
double peak_rss_mb();
void reset_peak_rss();
double available_memory_bytes();  // MemAvailable from /proc/meminfo; 0 when unknown

// For a process that allocates and frees the same tens of MB over and over (prepare's batches):
// glibc keeps freed memory up to 256 MB for reuse and serves blocks under 64 MB from its heap,
// instead of handing each one back to the kernel and faulting its pages in again, and all threads
// share one heap (blocks freed by another thread than the one that made them reused by all).
// Process-wide, before the threads start: for the tools' streaming commands, not for a library's
// caller.
void keep_freed_memory_for_reuse();

// Asks the kernel to back [data, data + bytes) with transparent huge pages where it allows them
// (/sys/kernel/mm/transparent_hugepage/enabled: always or madvise): a large buffer written once
// then faults in 2 MiB at a time, not 4 KiB (a page fault costs 10-25 µs on some virtual
// machines). Only whole 2 MiB pages inside the range are advised; a no-op elsewhere.
void advise_huge_pages(void* data, size_t bytes);

}  // namespace xsa
