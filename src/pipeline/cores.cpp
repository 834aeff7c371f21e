#include "pipeline/cores.hpp"

#include <dlfcn.h>
#include <hwloc.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "core/error.hpp"
#include "core/logging.hpp"
#ifdef DSP_HAVE_CUDA
#include <hwloc/cudart.h>
#endif

namespace dsp {
namespace {

constexpr int kMaskWords = 64;  // cpusets of up to 4096 processing units travel in the gather

class Topology {
 public:
  Topology() {
    DSP_CHECK(hwloc_topology_init(&t_) == 0 && hwloc_topology_load(t_) == 0,
              "hwloc: cannot load the machine topology");
  }
  ~Topology() { hwloc_topology_destroy(t_); }
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;
  hwloc_topology_t get() const { return t_; }

 private:
  hwloc_topology_t t_ = nullptr;
};

class Bitmap {
 public:
  Bitmap() : b_(hwloc_bitmap_alloc()) {}
  ~Bitmap() { hwloc_bitmap_free(b_); }
  Bitmap(const Bitmap&) = delete;
  Bitmap& operator=(const Bitmap&) = delete;
  hwloc_bitmap_t get() const { return b_; }

 private:
  hwloc_bitmap_t b_;
};

uint64_t host_hash() {
  char name[HOST_NAME_MAX + 1] = {0};
  ::gethostname(name, HOST_NAME_MAX);
  uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (const char* p = name; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 1099511628211ULL;
  return h;
}

// The processing units this process may run on, narrowed to a GPU's neighbourhood when it has one.
void allowed_cpus(const Topology& topo, const Device& device, hwloc_bitmap_t out) {
  hwloc_const_cpuset_t machine = hwloc_topology_get_allowed_cpuset(topo.get());
  if (hwloc_get_cpubind(topo.get(), out, HWLOC_CPUBIND_PROCESS) != 0)
    hwloc_bitmap_copy(out, machine);
  hwloc_bitmap_and(out, out, machine);
  if (hwloc_bitmap_iszero(out)) hwloc_bitmap_copy(out, machine);
#ifdef DSP_HAVE_CUDA
  if (device.is_cuda()) {
    Bitmap near;
    if (hwloc_cudart_get_device_cpuset(topo.get(), device.index, near.get()) == 0 &&
        hwloc_bitmap_intersects(near.get(), out)) {
      hwloc_bitmap_and(out, out, near.get());
    }
  }
#else
  (void)device;
#endif
}

// The cores of `set` in topology order, each as the list of its processing units in `set`; PUs
// when the topology shows no cores.
std::vector<std::vector<int>> cores_of(const Topology& topo, hwloc_const_bitmap_t set) {
  std::vector<std::vector<int>> cores;
  const int n = hwloc_get_nbobjs_by_type(topo.get(), HWLOC_OBJ_CORE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t core = hwloc_get_obj_by_type(topo.get(), HWLOC_OBJ_CORE, i);
    std::vector<int> pus;
    int pu = -1;
    while ((pu = hwloc_bitmap_next(core->cpuset, pu)) != -1) {
      if (hwloc_bitmap_isset(set, pu)) pus.push_back(pu);
    }
    if (!pus.empty()) cores.push_back(std::move(pus));
  }
  if (cores.empty()) {
    int pu = -1;
    while ((pu = hwloc_bitmap_next(set, pu)) != -1) cores.push_back({pu});
  }
  return cores;
}

}  // namespace

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string s;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += j > i ? fmt::format("{}-{}", cpus[i], cpus[j]) : fmt::format("{}", cpus[i]);
    i = j + 1;
  }
  return s;
}

std::string CoreShare::describe() const {
  return fmt::format("cpus {} ({} thread{}{}), node rank {} of {}{}", format_cpu_list(cpus),
                     threads, threads == 1 ? "" : "s", bound ? ", bound" : "", node_rank, node_size,
                     sharing > 1 ? fmt::format(", cpuset split {} ways", sharing) : "");
}

NodePlace node_place(Communicator& comm) {
  const int64_t mine = static_cast<int64_t>(host_hash());
  std::vector<int64_t> all(comm.size());
  OpOptions o;
  o.label = "cores.node";
  comm.all_gather(&mine, all.data(), 1, DType::kInt64, o);
  NodePlace p;
  p.size = 0;
  for (int r = 0; r < comm.size(); ++r) {
    if (all[r] != mine) continue;
    if (r == comm.rank()) p.rank = p.size;
    ++p.size;
  }
  return p;
}

CoreShare share_cores(Communicator& comm, const Device& device, int requested, bool bind) {
  Topology topo;
  Bitmap allowed;
  allowed_cpus(topo, device, allowed.get());
  // Who shares this node, and who shares this very cpuset: one gather of (host, cpuset).
  std::vector<int64_t> mine(1 + kMaskWords, 0),
      all(static_cast<size_t>(comm.size()) * (1 + kMaskWords));
  mine[0] = static_cast<int64_t>(host_hash());
  static_assert(sizeof(unsigned long) == 8, "hwloc bitmap words are 64-bit here");
  for (int w = 0; w < kMaskWords; ++w) {
    mine[1 + w] = static_cast<int64_t>(hwloc_bitmap_to_ith_ulong(allowed.get(), w));
  }
  OpOptions o;
  o.label = "cores.gather";
  comm.all_gather(mine.data(), all.data(), 1 + kMaskWords, DType::kInt64, o);
  CoreShare s;
  s.node_size = 0;
  s.sharing = 0;
  int share_index = 0;
  for (int r = 0; r < comm.size(); ++r) {
    const int64_t* rec = all.data() + static_cast<size_t>(r) * (1 + kMaskWords);
    if (rec[0] != mine[0]) continue;
    if (r == comm.rank()) s.node_rank = s.node_size;
    ++s.node_size;
    if (std::equal(rec + 1, rec + 1 + kMaskWords, mine.begin() + 1)) {
      if (r == comm.rank()) share_index = s.sharing;
      ++s.sharing;
    }
  }
  const std::vector<std::vector<int>> cores = cores_of(topo, allowed.get());
  const int nc = static_cast<int>(cores.size()), k = s.sharing;
  const int first = k <= nc ? share_index * nc / k : share_index % nc;
  const int last = k <= nc ? (share_index + 1) * nc / k : first + 1;
  for (int c = first; c < last; ++c) s.cpus.insert(s.cpus.end(), cores[c].begin(), cores[c].end());
  std::sort(s.cpus.begin(), s.cpus.end());
  s.threads = requested > 0 ? requested : std::max<int>(1, static_cast<int>(s.cpus.size()));
  if (bind) {
    Bitmap set;
    for (int pu : s.cpus) hwloc_bitmap_set(set.get(), pu);
    s.bound = hwloc_set_cpubind(topo.get(), set.get(), HWLOC_CPUBIND_PROCESS) == 0;
    if (!s.bound) DSP_WARN("cores", "could not bind to cpus {}", format_cpu_list(s.cpus));
  }
  return s;
}

namespace {

// The OS indices set in `set`.
std::vector<int> indices_of(hwloc_const_bitmap_t set) {
  std::vector<int> out;
  int i = -1;
  while ((i = hwloc_bitmap_next(set, i)) != -1) out.push_back(i);
  return out;
}

// `bytes` of page-aligned memory bound to `nodes` (unbound where the system refuses, logged once).
std::shared_ptr<void> alloc_on_nodes(const std::shared_ptr<Topology>& topo,
                                     hwloc_const_bitmap_t nodes, size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  void* p =
      hwloc_alloc_membind(topo->get(), bytes, nodes, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET);
  if (!p) {
    static std::once_flag once;
    const int err = errno;
    std::call_once(once, [err] {
      DSP_DEBUG("cores", "staging memory not bound to NUMA nodes (hwloc_alloc_membind: {})",
                std::strerror(err));
    });
    p = hwloc_alloc(topo->get(), bytes);
    DSP_CHECK(p != nullptr, "cannot allocate {} bytes of staging memory", bytes);
  }
  return std::shared_ptr<void>(p, [topo, bytes](void* q) { hwloc_free(topo->get(), q, bytes); });
}

}  // namespace

NearMemory near_memory(const Device& device) {
  auto topo = std::make_shared<Topology>();
  Bitmap cpus;
  allowed_cpus(*topo, device, cpus.get());
  auto nodes = std::shared_ptr<hwloc_bitmap_s>(hwloc_bitmap_alloc(), hwloc_bitmap_free);
  hwloc_cpuset_to_nodeset(topo->get(), cpus.get(), nodes.get());
  NearMemory m;
  m.nodes = indices_of(nodes.get());
  m.alloc = [topo, nodes](size_t bytes) { return alloc_on_nodes(topo, nodes.get(), bytes); };
  return m;
}

namespace {

// One topology for the thread bindings of every batch and the page lookups (loading one reads
// sysfs: milliseconds).
const Topology& shared_topology() {
  static const Topology topo;
  return topo;
}

constexpr int kThreadNodes = HWLOC_MEMBIND_THREAD | HWLOC_MEMBIND_BYNODESET;

}  // namespace

struct ThreadMemoryBinding::State {
  Bitmap previous;
  hwloc_membind_policy_t policy = HWLOC_MEMBIND_DEFAULT;
};

ThreadMemoryBinding::ThreadMemoryBinding(const std::vector<int>& nodes) {
  if (nodes.empty()) return;
  hwloc_topology_t topo = shared_topology().get();
  auto s = std::make_unique<State>();
  Bitmap set;
  for (int n : nodes) hwloc_bitmap_set(set.get(), static_cast<unsigned>(n));
  if (hwloc_get_membind(topo, s->previous.get(), &s->policy, kThreadNodes) != 0 ||
      hwloc_set_membind(topo, set.get(), HWLOC_MEMBIND_BIND, kThreadNodes) != 0) {
    static std::once_flag once;
    const int err = errno;
    std::call_once(once, [err, &nodes] {
      DSP_DEBUG("cores", "thread memory not bound to NUMA nodes {} (hwloc_set_membind: {})",
                format_cpu_list(nodes), std::strerror(err));
    });
    return;
  }
  state_ = std::move(s);
}

ThreadMemoryBinding::~ThreadMemoryBinding() {
  if (!state_) return;
  if (hwloc_set_membind(shared_topology().get(), state_->previous.get(), state_->policy,
                        kThreadNodes) != 0) {
    DSP_WARN("cores", "could not restore this thread's memory policy (hwloc_set_membind: {})",
             std::strerror(errno));
  }
}

std::vector<int> thread_memory_nodes() {
  Bitmap nodes;
  hwloc_membind_policy_t policy;
  if (hwloc_get_membind(shared_topology().get(), nodes.get(), &policy, kThreadNodes) != 0 ||
      policy == HWLOC_MEMBIND_DEFAULT || policy == HWLOC_MEMBIND_FIRSTTOUCH) {
    return {};
  }
  return indices_of(nodes.get());
}

std::vector<int> memory_nodes(const void* p, size_t bytes) {
  Bitmap nodes;
  if (hwloc_get_area_memlocation(shared_topology().get(), p, bytes, nodes.get(),
                                 HWLOC_MEMBIND_BYNODESET) != 0) {
    return {};
  }
  return indices_of(nodes.get());
}

void set_thread_pools(int threads) {
  set_omp_threads(threads);
  set_blas_threads(threads);
}

void set_omp_threads(int threads) { omp_set_num_threads(std::max(1, threads)); }

void set_blas_threads(int threads) {
  if (auto* set_blas =
          reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set_blas(std::max(1, threads));
  }
}

void ensure_passive_waits(char** argv) {
  if (std::getenv("DSP_PASSIVE_WAITS") != nullptr) return;  // already re-executed
  const char* spin = std::getenv("DSP_SPIN_WAIT");
  if (spin != nullptr && std::string(spin) == "1") return;
  bool changed = false;
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) {
    changed |= ::setenv("OMP_WAIT_POLICY", "passive", 0) == 0;
  }
  if (!std::getenv("OPENBLAS_THREAD_TIMEOUT")) {
    changed |= ::setenv("OPENBLAS_THREAD_TIMEOUT", "4", 0) == 0;
  }
  ::setenv("DSP_PASSIVE_WAITS", "1", 1);
  if (!changed) return;
  ::execv("/proc/self/exe", argv);
  // Still here: the libraries keep their defaults; nothing else changes.
  DSP_DEBUG("cores", "could not re-execute with passive waits: {}", std::strerror(errno));
}

bool bind_this_thread(const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  }
  return !cpus.empty() && pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

}  // namespace dsp
