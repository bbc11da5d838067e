// File helpers that name the path in every error, and atomic writes: data goes to a temporary file
// beside the target, is flushed to disk, then renamed over it, so a crash at any moment leaves
// either the old file or the new one, never a torn one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace xsa {

std::string read_file(const std::filesystem::path& path);  // throws Error naming the path
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);
// Flushes a directory entry (after a rename into it) so the rename itself survives a crash.
void sync_directory(const std::filesystem::path& dir);

}  // namespace xsa
