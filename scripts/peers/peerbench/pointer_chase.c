// Memory latency on this machine: a dependent chain of loads through a random cyclic permutation
// of cache lines in a buffer far larger than the caches, on 4 KiB pages and on transparent huge
// pages. The sampler's random reads (a neighbour list's entries, a frontier node's indptr pair)
// pay this latency unless prefetches overlap them.
// Usage: pointer_chase [MiB] [loads]   (prints JSON: ns per load for each page size)
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

static double chase(size_t bytes, long loads, int huge) {
  const size_t line = 64, n = bytes / line;
  char* buf = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED) return -1;
  madvise(buf, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  size_t* order = malloc(n * sizeof(size_t));
  for (size_t i = 0; i < n; ++i) order[i] = i;
  for (size_t i = n - 1; i > 0; --i) {  // Fisher-Yates: one cycle through every line
    size_t j = next() % (i + 1), t = order[i];
    order[i] = order[j], order[j] = t;
  }
  for (size_t i = 0; i < n; ++i) {
    *(char**)(buf + order[i] * line) = buf + order[(i + 1) % n] * line;
  }
  free(order);
  char* p = buf;
  for (long i = 0; i < loads / 10; ++i) p = *(char**)p;  // warm the TLB and page tables
  double t0 = now();
  for (long i = 0; i < loads; ++i) p = *(char**)p;
  double ns = 1e9 * (now() - t0) / loads;
  if (p == NULL) puts("");  // keeps the chain live
  munmap(buf, bytes);
  return ns;
}

int main(int argc, char** argv) {
  size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 1024;
  long loads = argc > 2 ? strtol(argv[2], NULL, 10) : 20000000;
  double small = chase(mib << 20, loads, 0), huge = chase(mib << 20, loads, 1);
  printf("{\"buffer_mib\": %zu, \"loads\": %ld, \"ns_per_load_4k\": %.1f, "
         "\"ns_per_load_thp\": %.1f}\n", mib, loads, small, huge);
  return 0;
}
