// Resident memory of this process from /proc (MB). reset_peak_rss() restarts the peak (VmHWM), so a
// phase of work can report its own peak.
#pragma once

namespace xsa {

double rss_mb();
double peak_rss_mb();
void reset_peak_rss();
double available_memory_bytes();  // MemAvailable from /proc/meminfo; 0 when unknown

}  // namespace xsa
