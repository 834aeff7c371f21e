#include "layout/store/fifo_cache.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "core/error.hpp"

namespace dsp {

double fifo_hit_rate(const std::vector<int64_t>& ids, const std::vector<int64_t>& batch_end,
                     int64_t num_nodes, int64_t capacity) {
  if (ids.empty()) return 0.0;
  if (capacity <= 0) return 0.0;
  std::vector<int32_t> slot_of(num_nodes, -1);
  std::vector<int64_t> node_of(capacity, -1);
  uint64_t tail = 0;
  FifoIndex fifo{slot_of.data(), node_of.data(), &tail, capacity};
  std::vector<int64_t> misses;
  int64_t hits = 0, b = 0;
  for (int64_t e : batch_end) {
    misses.clear();
    for (int64_t i = b; i < e; ++i) {
      if (fifo.find(ids[i]) >= 0) {
        ++hits;
      } else {
        misses.push_back(ids[i]);
      }
    }
    const int64_t m = std::min<int64_t>(static_cast<int64_t>(misses.size()), capacity);
    for (int64_t k = 0; k < m; ++k) {
      if (fifo.find(misses[k]) < 0) fifo.push(misses[k]);  // a batch's ids are distinct
    }
    b = e;
  }
  return static_cast<double>(hits) / static_cast<double>(ids.size());
}

// The start of the mapping; slot_of, node_of and the rows follow at 64-byte boundaries.
struct FifoRowCache::Header {
  std::atomic<uint32_t> ready;  // set last by the creator
  uint32_t version;
  int64_t capacity, num_nodes, row_bytes;
  uint64_t tail;
  int64_t lookups, hits, inserts, evictions;
  pthread_mutex_t mu;  // process-shared, robust
};

namespace {
constexpr uint32_t kFifoVersion = 1;
size_t round64(size_t x) { return (x + 63) / 64 * 64; }
}  // namespace

// Holds the header's mutex; if its last owner died mid-update, repairs the index first.
class FifoRowCache::Lock {
 public:
  explicit Lock(FifoRowCache& c) : c_(c) {
    int rc = pthread_mutex_lock(&c.header_->mu);
    if (rc == EOWNERDEAD) {
      repair();
      pthread_mutex_consistent(&c.header_->mu);
    } else {
      DSP_CHECK(rc == 0, "fifo cache: cannot lock ({})", std::strerror(rc));
    }
  }
  ~Lock() { pthread_mutex_unlock(&c_.header_->mu); }

 private:
  // The dead owner may have left the slot it was writing half copied and the two maps disagreeing:
  // drop that slot, then rebuild slot_of from node_of keeping the first slot of any node.
  void repair() {
    FifoIndex& x = c_.index_;
    if (*x.tail > 0) x.node_of[(*x.tail - 1) % static_cast<uint64_t>(x.capacity)] = -1;
    std::fill(x.slot_of, x.slot_of + c_.num_nodes_, -1);
    for (int64_t s = 0; s < x.capacity; ++s) {
      const int64_t v = x.node_of[s];
      if (v < 0 || v >= c_.num_nodes_ || x.slot_of[v] >= 0) {
        x.node_of[s] = -1;
      } else {
        x.slot_of[v] = static_cast<int32_t>(s);
      }
    }
  }
  FifoRowCache& c_;
};

FifoRowCache::FifoRowCache(int64_t capacity, int64_t num_nodes, size_t row_bytes,
                           const std::string& shm_name)
    : capacity_(capacity), num_nodes_(num_nodes), row_bytes_(row_bytes), shm_name_(shm_name) {
  DSP_CHECK_ARG(capacity > 0 && capacity < (int64_t{1} << 31),
                "fifo cache: capacity must be in [1, 2^31), got {}", capacity);
  DSP_CHECK_ARG(num_nodes > 0 && row_bytes > 0, "fifo cache: {} nodes of {} bytes", num_nodes,
                row_bytes);
  const size_t off_slot = round64(sizeof(Header));
  const size_t off_node = off_slot + round64(sizeof(int32_t) * num_nodes);
  const size_t off_rows = off_node + round64(sizeof(int64_t) * capacity);
  map_bytes_ = off_rows + static_cast<size_t>(capacity) * row_bytes;
  int fd = -1;
  if (!shm_name.empty()) {
    DSP_CHECK_ARG(shm_name[0] == '/' && shm_name.find('/', 1) == std::string::npos,
                  "fifo cache: shared memory name '{}' must be /name", shm_name);
    fd = shm_open(shm_name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    creator_ = fd >= 0;
    if (!creator_) {
      DSP_CHECK_T(IoError, errno == EEXIST, "fifo cache: shm_open({}): {}", shm_name,
                  std::strerror(errno));
      fd = shm_open(shm_name.c_str(), O_RDWR, 0600);
      DSP_CHECK_T(IoError, fd >= 0, "fifo cache: shm_open({}): {}", shm_name, std::strerror(errno));
    } else {
      // Reserved, not only sized: on a full /dev/shm (containers often give it 64 MB) writing a
      // sparse object's page kills the process with SIGBUS, leaving the object behind.
      int err = ftruncate(fd, static_cast<off_t>(map_bytes_)) != 0 ? errno : 0;
      if (err == 0) err = posix_fallocate(fd, 0, static_cast<off_t>(map_bytes_));
      if (err != 0) {
        close(fd);
        shm_unlink(shm_name.c_str());
        DSP_THROW_T(IoError, "fifo cache: cannot reserve {} bytes of shared memory for {}: {}",
                    map_bytes_, shm_name, std::strerror(err));
      }
    }
    if (!creator_) attach_check(fd);
    map_ = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
  } else {
    map_ = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    creator_ = true;
  }
  DSP_CHECK_T(IoError, map_ != MAP_FAILED, "fifo cache: cannot map {} bytes: {}", map_bytes_,
              std::strerror(errno));
  auto* base = static_cast<unsigned char*>(map_);
  header_ = reinterpret_cast<Header*>(base);
  index_ = {reinterpret_cast<int32_t*>(base + off_slot),
            reinterpret_cast<int64_t*>(base + off_node), &header_->tail, capacity};
  rows_ = base + off_rows;
  if (creator_) {
    header_->version = kFifoVersion;
    header_->capacity = capacity;
    header_->num_nodes = num_nodes;
    header_->row_bytes = static_cast<int64_t>(row_bytes);
    header_->tail = 0;
    header_->lookups = header_->hits = header_->inserts = header_->evictions = 0;
    std::fill(index_.slot_of, index_.slot_of + num_nodes, -1);
    std::fill(index_.node_of, index_.node_of + capacity, -1);
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&header_->mu, &attr);
    pthread_mutexattr_destroy(&attr);
    header_->ready.store(1, std::memory_order_release);
    return;
  }
}

// An attacher may open the object before its creator sized and initialised it: waits (bounded)
// for the header, then checks the geometry before mapping the whole object.
void FifoRowCache::attach_check(int fd) {
  // Only an object of this user, owner-only, is attached (the creator makes it so: O_EXCL, 0600):
  // one that another user made under the name first could be read or rewritten by that user.
  struct stat own {};
  if (fstat(fd, &own) != 0 || own.st_uid != geteuid() || (own.st_mode & 077) != 0) {
    close(fd);
    DSP_THROW_T(IoError,
                "fifo cache: {} exists but is not this user's owner-only object (owner uid {}, "
                "mode {:o}); refusing to share rows through it",
                shm_name_, own.st_uid, own.st_mode & 0777);
  }
  const size_t header_bytes = round64(sizeof(Header));
  for (int i = 0;; ++i) {
    struct stat st {};
    DSP_CHECK_T(IoError, fstat(fd, &st) == 0, "fifo cache: fstat({})", shm_name_);
    if (static_cast<size_t>(st.st_size) >= header_bytes) break;
    DSP_CHECK_T(IoError, i < 10000, "fifo cache: {} was never sized", shm_name_);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void* m = mmap(nullptr, header_bytes, PROT_READ, MAP_SHARED, fd, 0);
  DSP_CHECK_T(IoError, m != MAP_FAILED, "fifo cache: cannot map {}: {}", shm_name_,
              std::strerror(errno));
  const auto* h = static_cast<const Header*>(m);
  bool ready = false;
  for (int i = 0; i < 10000 && !ready; ++i) {
    ready = h->ready.load(std::memory_order_acquire) != 0;
    if (!ready) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  struct {
    uint32_t version;
    int64_t capacity, num_nodes, row_bytes;
  } const g = {h->version, h->capacity, h->num_nodes, h->row_bytes};
  munmap(m, header_bytes);
  if (!ready) close(fd);
  DSP_CHECK_T(IoError, ready, "fifo cache: {} was never initialised", shm_name_);
  if (g.version != kFifoVersion || g.capacity != capacity_ || g.num_nodes != num_nodes_ ||
      g.row_bytes != static_cast<int64_t>(row_bytes_)) {
    close(fd);
    DSP_THROW_T(InvalidArgument,
                "fifo cache: {} holds {} rows of {} bytes for {} nodes, this cache wants {} of {} "
                "for {}",
                shm_name_, g.capacity, g.row_bytes, g.num_nodes, capacity_, row_bytes_, num_nodes_);
  }
}

FifoRowCache::~FifoRowCache() {
  if (map_ && map_ != MAP_FAILED) munmap(map_, map_bytes_);
  if (creator_ && !shm_name_.empty()) shm_unlink(shm_name_.c_str());
}

int64_t FifoRowCache::lookup(const int64_t* ids, int64_t n, uint8_t* hit, unsigned char* rows) {
  Lock lock(*this);
  int64_t hits = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = index_.find(ids[i]);
    if (s < 0) continue;
    hit[i] = 1;
    std::memcpy(rows + hits * row_bytes_, rows_ + s * row_bytes_, row_bytes_);
    ++hits;
  }
  header_->lookups += n;
  header_->hits += hits;
  return hits;
}

int64_t FifoRowCache::insert(const int64_t* ids, const unsigned char* rows, int64_t n) {
  Lock lock(*this);
  int64_t added = 0;
  for (int64_t k = 0; k < n && added < capacity_; ++k) {
    if (index_.find(ids[k]) >= 0) continue;  // held (maybe inserted by another rank meanwhile)
    if (index_.node_of[*index_.tail % static_cast<uint64_t>(capacity_)] >= 0) {
      ++header_->evictions;
    }
    const int64_t s = index_.push(ids[k]);
    std::memcpy(rows_ + s * row_bytes_, rows + k * row_bytes_, row_bytes_);
    ++added;
  }
  header_->inserts += added;
  return added;
}

std::vector<int64_t> FifoRowCache::held() const {
  Lock lock(const_cast<FifoRowCache&>(*this));
  return std::vector<int64_t>(index_.node_of, index_.node_of + capacity_);
}

FifoStats FifoRowCache::stats() const {
  Lock lock(const_cast<FifoRowCache&>(*this));
  return {header_->lookups, header_->hits, header_->inserts, header_->evictions};
}

void FifoLevels::enable(const FifoCacheOptions& o, int64_t num_nodes, size_t row_bytes) {
  DSP_CHECK_ARG(o.rows >= 0 && o.shared_rows >= 0, "fifo cache: negative capacity ({}, {})", o.rows,
                o.shared_rows);
  DSP_CHECK_ARG(o.shared_rows == 0 || o.rows > 0,
                "fifo cache: a shared level needs a first level (rows > 0)");
  first_.reset();
  shared_.reset();
  row_bytes_ = row_bytes;
  if (o.rows == 0) return;
  first_ = std::make_unique<FifoRowCache>(o.rows, num_nodes, row_bytes);
  if (o.shared_rows > 0) {
    shared_ = std::make_unique<FifoRowCache>(o.shared_rows, num_nodes, row_bytes, o.shared_name);
  }
}

void FifoLevels::serve(const int64_t* ids, int64_t n, uint8_t* wanted, const Place& place,
                       int64_t hits[2]) {
  hits[0] = hits[1] = 0;
  std::vector<int64_t> want, pos;
  for (int64_t i = 0; i < n; ++i) {
    if (!wanted[i]) continue;
    want.push_back(ids[i]);
    pos.push_back(i);
  }
  for (int l = 0; l < 2; ++l) {
    FifoRowCache* cache = level(l);
    if (cache == nullptr || want.empty()) continue;
    const int64_t m = static_cast<int64_t>(want.size());
    std::vector<uint8_t> hit(m, 0);
    std::vector<unsigned char> rows(m * row_bytes_);
    const int64_t h = cache->lookup(want.data(), m, hit.data(), rows.data());
    if (h == 0) continue;
    std::vector<int64_t> hit_ids, hit_pos, rest, rest_pos;
    for (int64_t k = 0; k < m; ++k) {
      (hit[k] ? hit_ids : rest).push_back(want[k]);
      (hit[k] ? hit_pos : rest_pos).push_back(pos[k]);
      if (hit[k]) wanted[pos[k]] = 0;
    }
    place(rows.data(), hit_pos.data(), hit_ids.data(), h);
    if (l == 1) first_->insert(hit_ids.data(), rows.data(), h);
    hits[l] = h;
    want.swap(rest);
    pos.swap(rest_pos);
  }
}

void FifoLevels::insert(const int64_t* ids, const unsigned char* rows, int64_t m) {
  if (first_) first_->insert(ids, rows, m);
  if (shared_) shared_->insert(ids, rows, m);
}

}  // namespace dsp
