#include "core/memory.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <unistd.h>

#include "core/error.hpp"
#include "core/huge_pages.hpp"

namespace dsp {
namespace {

// A cgroup v2 file holding one number ("max" reads as unlimited).
uint64_t read_cgroup_value(const char* path) {
  std::ifstream f(path);
  std::string s;
  if (!(f >> s) || s == "max") return UINT64_MAX;
  try {
    return std::stoull(s);
  } catch (const std::exception&) {
    return UINT64_MAX;
  }
}

}  // namespace

uint64_t parse_bytes(const std::string& flag, const std::string& text) {
  std::string s = text;
  // Strip "B" / "iB" and read the multiplier letter.
  if (!s.empty() && (s.back() == 'B' || s.back() == 'b')) s.pop_back();
  if (!s.empty() && s.back() == 'i') s.pop_back();
  double mult = 1;
  if (!s.empty() && std::isalpha(static_cast<unsigned char>(s.back()))) {
    switch (std::tolower(static_cast<unsigned char>(s.back()))) {
      case 'k':
        mult = 1024.0;
        break;
      case 'm':
        mult = 1024.0 * 1024;
        break;
      case 'g':
        mult = 1024.0 * 1024 * 1024;
        break;
      case 't':
        mult = 1024.0 * 1024 * 1024 * 1024;
        break;
      default:
        mult = 0;
    }
    s.pop_back();
  }
  size_t used = 0;
  double v = -1;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  DSP_CHECK_ARG(
      mult > 0 && !s.empty() && used == s.size() && std::isfinite(v) && v >= 0 && v * mult < 1.8e19,
      "{}: expected a size such as 512M, 12G or 1.5GiB, got '{}'", flag, text);
  return static_cast<uint64_t>(v * mult);
}

std::string format_bytes(uint64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt::format("{:.2f} GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt::format("{:.1f} KiB", b / 1024.0);
  return fmt::format("{} B", bytes);
}

uint64_t available_memory() {
  uint64_t avail = available_memory_bytes();
  const uint64_t limit = read_cgroup_value("/sys/fs/cgroup/memory.max");
  if (limit != UINT64_MAX) {
    const uint64_t used = read_cgroup_value("/sys/fs/cgroup/memory.current");
    const uint64_t left = used == UINT64_MAX || used > limit ? 0 : limit - used;
    if (avail == 0 || left < avail) avail = left;
  }
  return avail;
}

uint64_t default_memory_budget() { return available_memory() / 4 * 3; }

uint64_t process_rss_bytes() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(f >> size >> resident)) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

uint64_t memory_left(uint64_t budget) {
  const uint64_t rss = process_rss_bytes();
  return budget > rss ? budget - rss : 0;
}

void check_memory(const std::string& what, uint64_t needed, uint64_t budget,
                  const std::string& lower) {
  needed += process_rss_bytes();
  if (needed <= budget) return;
  DSP_THROW("{} needs about {} of memory but the budget is {} ({} available): {}", what,
            format_bytes(needed), format_bytes(budget), format_bytes(available_memory()), lower);
}

}  // namespace dsp
