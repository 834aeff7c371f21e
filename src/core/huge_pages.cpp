#include "core/huge_pages.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "core/error.hpp"
#include "core/logging.hpp"
#include "core/memory.hpp"

namespace dsp {

size_t available_memory_bytes() {
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[256];
  size_t kb = 0;
  while (std::fgets(line, sizeof(line), f)) {
    if (std::sscanf(line, "MemAvailable: %zu kB", &kb) == 1) break;
  }
  std::fclose(f);
  return kb * 1024;
}

namespace {

std::atomic<size_t> g_held{0};

// Ranks of this node sharing its memory, as the launcher reports them (1 when run alone).
double node_ranks() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"}) {
    if (const char* s = std::getenv(v)) {
      const long n = std::strtol(s, nullptr, 10);
      if (n > 0) return static_cast<double>(n);
    }
  }
  return 1.0;
}

// Takes `bytes` from the process's budget, or nothing (false) when they do not fit.
bool reserve(size_t bytes, double max_share) {
  const size_t avail = available_memory_bytes();
  if (avail == 0) return false;
  size_t held = g_held.load();
  do {
    const double budget = max_share * static_cast<double>(avail + held) / node_ranks();
    if (static_cast<double>(held + bytes) > budget) return false;
  } while (!g_held.compare_exchange_weak(held, held + bytes));
  return true;
}

}  // namespace

size_t huge_page_bytes_held() { return g_held.load(); }

HugePageBuffer huge_page_zeros(size_t bytes) {
  HugePageBuffer b;
  if (bytes == 0) return b;
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t len = (bytes + kHuge - 1) / kHuge * kHuge;
  void* raw =
      ::mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  DSP_CHECK(raw != MAP_FAILED, "cannot map {} bytes of memory: {}", bytes, std::strerror(errno));
  const uintptr_t at = (reinterpret_cast<uintptr_t>(raw) + kHuge - 1) / kHuge * kHuge;
  void* p = reinterpret_cast<void*>(at);
  const char* off = std::getenv("DSP_HUGE_PAGES");
  b.huge = !(off && std::string(off) == "0") && ::madvise(p, len, MADV_HUGEPAGE) == 0;
  b.data = std::shared_ptr<void>(p, [raw, len](void*) { ::munmap(raw, len + kHuge); });
  b.bytes = bytes;
  return b;
}

HugePageBuffer huge_page_copy(const void* src, size_t bytes, double max_share) {
  if (!src) return HugePageBuffer{};
  return huge_page_fill(
      bytes, [&](void* p) { std::memcpy(p, src, bytes); }, max_share);
}

HugePageBuffer huge_page_fill(size_t bytes, const std::function<void(void*)>& fill,
                              double max_share) {
  HugePageBuffer b;
  if (bytes == 0) return b;
  if (const char* off = std::getenv("DSP_HUGE_PAGES"); off && std::string(off) == "0") return b;
  if (!reserve(bytes, max_share)) return b;
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t len = (bytes + kHuge - 1) / kHuge * kHuge;
  // One extra huge page of address space, so the copy can start on a 2 MiB boundary (THP maps
  // only aligned 2 MiB ranges).
  void* raw =
      ::mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) {
    g_held -= bytes;
    return b;
  }
  const uintptr_t at = (reinterpret_cast<uintptr_t>(raw) + kHuge - 1) / kHuge * kHuge;
  void* p = reinterpret_cast<void*>(at);
  b.huge = ::madvise(p, len, MADV_HUGEPAGE) == 0;  // before the first touch: faults take 2 MiB
  fill(p);
  b.data = std::shared_ptr<void>(p, [raw, len, bytes](void*) {
    ::munmap(raw, len + kHuge);
    g_held -= bytes;
  });
  b.bytes = bytes;
  return b;
}

namespace {
std::atomic<size_t> g_random_reads{0};
}  // namespace

void note_random_reads(size_t bytes) { g_random_reads = bytes; }

bool beyond_memory_share(size_t bytes) {
  if (const char* on = std::getenv("DSP_BEYOND_MEMORY"); on && std::string(on) == "1") return true;
  const size_t avail = available_memory_bytes();
  const size_t together = std::max(bytes, g_random_reads.load());
  return avail != 0 && static_cast<double>(together) > static_cast<double>(avail) / node_ranks();
}

bool advise_random_reads(const void* data, size_t bytes, const char* what) {
  if (data == nullptr || bytes == 0) return false;
  if (const char* off = std::getenv("DSP_RANDOM_READS"); off && std::string(off) == "0")
    return false;
  if (!beyond_memory_share(bytes)) return false;
  if (!advise_pages(data, bytes, MADV_RANDOM)) return false;
  DSP_INFO("memory", "{} ({}) read through its mapping at random, read-around off", what,
           format_bytes(bytes));
  return true;
}

bool advise_pages(const void* data, size_t bytes, int advice) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data) / page * page;
  const auto end = reinterpret_cast<uintptr_t>(data) + bytes;
  return ::madvise(reinterpret_cast<void*>(begin), end - begin, advice) == 0;
}

}  // namespace dsp
