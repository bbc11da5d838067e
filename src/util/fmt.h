// {fmt}, included through here: GCC 12 at -O3 reports a false -Wstringop-overflow inside fmt 9's
// fill_t (core.h, a fill character copied into its 4-byte buffer) wherever a format string with a
// fill or alignment is parsed at compile time. The warning is silenced for fmt's own lines only.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
#include <fmt/format.h>
#include <fmt/ranges.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
