#include "core/disk.hpp"

#include <filesystem>
#include <limits>
#include <system_error>

#include "core/error.hpp"
#include "core/memory.hpp"

namespace dsp {
namespace fs = std::filesystem;

std::string existing_ancestor(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) return path;
  while (!p.empty() && !fs::exists(p, ec) && p != p.root_path()) p = p.parent_path();
  return p.string();
}

uint64_t free_disk_bytes(const std::string& path) {
  std::error_code ec;
  const fs::space_info sp = fs::space(existing_ancestor(path), ec);
  if (ec || sp.available == static_cast<std::uintmax_t>(-1)) {
    return std::numeric_limits<uint64_t>::max();
  }
  return static_cast<uint64_t>(sp.available);
}

void check_disk(const std::string& what, const std::string& path, uint64_t needed,
                uint64_t available, const std::string& lower) {
  if (needed <= available) return;
  DSP_THROW("{} needs about {} of disk in {} but {} is free: {}", what, format_bytes(needed),
            existing_ancestor(path), format_bytes(available), lower);
}

void check_disk(const std::string& what, const std::string& path, uint64_t needed,
                const std::string& lower) {
  check_disk(what, path, needed, free_disk_bytes(path), lower);
}

}  // namespace dsp
