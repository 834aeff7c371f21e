#pragma once
// Out-of-core CSR construction: edge entries become sortable keys (row, neighbour), collected in
// a bounded buffer; a full buffer is sorted (one piece per thread), its repeats dropped and written
// as runs to a temporary directory; the runs are then merged k-way and the distinct entries in
// key order stream into indptr.npy / indices.npy (CsrFileWriter). The result is identical to
// build_in_csr with dedup (the first weight of repeated edges kept), so the in-memory and the
// out-of-core paths of `dsp generate` and `dsp convert` write the same files.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <queue>
#include <string>
#include <type_traits>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/parallel.hpp"
#include "graph/npy.hpp"

namespace dsp {

// An entry of an in-neighbour CSR as one key: the row (destination) in the high 32 bits, the
// neighbour in the low 32. Node ids must be below kMaxExternalNodes.
inline uint64_t edge_key(uint64_t row, uint64_t nbr) { return row << 32 | nbr; }
constexpr int64_t kMaxExternalNodes = (int64_t{1} << 32) - 1;
// A dropped entry (a self loop that is removed): the largest key, ignored by the merge.
constexpr uint64_t kNoEdge = ~uint64_t{0};

struct WeightedKey {
  uint64_t key;
  float weight;
};
inline uint64_t key_of(uint64_t k) { return k; }
inline uint64_t key_of(const WeightedKey& r) { return r.key; }

// Rec is uint64_t (a key) or WeightedKey. Records with equal keys keep their push order (stable
// sort within a run, lower run first in the merge), so "the first" of repeats is well defined.
template <class Rec>
class ExternalSorter {
 public:
  // Holds up to `capacity` records in memory; runs go to files under `tmp_dir` (created here,
  // removed with the sorter). At most `max_fan_in` runs are open at once: more are first merged
  // in consecutive groups into longer runs (files and memory stay bounded however many runs a
  // small buffer made).
  ExternalSorter(std::string tmp_dir, size_t capacity, size_t max_fan_in = kMaxFanIn)
      : dir_(std::move(tmp_dir)),
        capacity_(std::max<size_t>(capacity, 1024)),
        fan_in_(std::max<size_t>(max_fan_in, 2)) {
    buf_.reset(new Rec[capacity_]);
  }
  static constexpr size_t kMaxFanIn = 256;
  ~ExternalSorter() {
    std::error_code ec;
    if (made_dir_) std::filesystem::remove_all(dir_, ec);
  }
  ExternalSorter(const ExternalSorter&) = delete;
  ExternalSorter& operator=(const ExternalSorter&) = delete;

  size_t capacity() const { return capacity_; }
  int runs() const { return spilled_runs_; }  // runs spilled from the buffer
  uint64_t spilled_bytes() const { return spilled_; }

  // Room for n <= capacity() more records (a run is spilled first when the buffer lacks it);
  // fill them, then call appended(n).
  Rec* append_space(size_t n) {
    DSP_CHECK(n <= capacity_, "external sort: {} records exceed the buffer of {}", n, capacity_);
    if (size_ + n > capacity_) spill();
    return buf_.get() + size_;
  }
  void appended(size_t n) { size_ += n; }

  // Calls out(const Rec* recs, size_t count) with one record per distinct key, in key order,
  // dropping kNoEdge; the buffer's memory is reused for the runs' read buffers.
  template <class Out>
  void merge(Out&& out) {
    std::vector<Source> src;
    if (runs_.empty()) {
      sort_pieces();
      for (auto [b, e] : pieces_) {
        Source m;
        m.cur = buf_.get() + b;
        m.end = buf_.get() + e;
        src.push_back(std::move(m));
      }
    } else {
      if (size_ > 0) spill();
      buf_.reset();
      while (runs_.size() > fan_in_) merge_level();
      const size_t per = std::max<size_t>(capacity_ / runs_.size(), 4096);
      for (const Run& r : runs_) src.push_back(Source::open(r, per));
    }
    merge_sources(src, out);
    buf_.reset();
    src.clear();
    std::error_code ec;
    if (made_dir_) std::filesystem::remove_all(dir_, ec);
    made_dir_ = false;
  }

 private:
  static constexpr size_t kBlock = size_t{1} << 16;
  struct Run {
    std::string path;
    uint64_t count;
  };
  struct Source;
  // A run file being written: records appended in key order; finish() closes it (checked).
  struct RunFile {
    Run run;
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f;
    explicit RunFile(std::string path)
        : run{std::move(path), 0}, f(std::fopen(run.path.c_str(), "wb"), &std::fclose) {
      DSP_CHECK_T(IoError, f != nullptr, "{}: cannot create a sort run", run.path);
    }
    void write(const Rec* recs, size_t n) {
      DSP_CHECK_T(IoError, std::fwrite(recs, sizeof(Rec), n, f.get()) == n,
                  "{}: writing a sort run failed (disk full?)", run.path);
      run.count += n;
    }
    Run finish() {
      DSP_CHECK_T(IoError, std::fclose(f.release()) == 0,
                  "{}: writing a sort run failed (disk full?)", run.path);
      return run;
    }
  };

  // One level of the cascade: consecutive groups of fan_in_ runs become one run each (repeats
  // dropped, the first kept: the groups keep the runs' order, so the final merge keeps the same
  // first record of every key).
  void merge_level() {
    std::vector<Run> next;
    const size_t per = std::max<size_t>(capacity_ / fan_in_, 4096);
    for (size_t g = 0; g < runs_.size(); g += fan_in_) {
      std::vector<Source> src;
      for (size_t i = g; i < std::min(runs_.size(), g + fan_in_); ++i) {
        src.push_back(Source::open(runs_[i], per));
      }
      RunFile w(dir_ + "/merged" + std::to_string(merged_++));
      merge_sources(src, [&](const Rec* recs, size_t count) { w.write(recs, count); });
      for (size_t i = g; i < std::min(runs_.size(), g + fan_in_); ++i) {
        std::error_code ec;
        std::filesystem::remove(runs_[i].path, ec);
      }
      next.push_back(w.finish());
    }
    runs_ = std::move(next);
  }

  // The k-way merge of sorted sources: out(recs, count) in blocks, one record per distinct key.
  template <class Out>
  void merge_sources(std::vector<Source>& src, Out&& out) {
    using Head = std::pair<uint64_t, size_t>;  // (key, source); ties go to the lower source
    std::priority_queue<Head, std::vector<Head>, std::greater<Head>> heap;
    for (size_t i = 0; i < src.size(); ++i) {
      if (src[i].ready()) heap.push({key_of(*src[i].cur), i});
    }
    std::vector<Rec> block;
    block.reserve(kBlock);
    uint64_t last = kNoEdge;
    while (!heap.empty()) {
      auto [k, i] = heap.top();
      heap.pop();
      if (k == kNoEdge) break;  // the largest key: every source is done with real entries
      if (k != last) {
        block.push_back(*src[i].cur);
        last = k;
        if (block.size() == kBlock) {
          out(block.data(), block.size());
          block.clear();
        }
      }
      ++src[i].cur;
      if (src[i].ready()) heap.push({key_of(*src[i].cur), i});
    }
    if (!block.empty()) out(block.data(), block.size());
  }

  // A sorted sequence: a span in memory, or a run file read through a buffer.
  struct Source {
    const Rec* cur = nullptr;
    const Rec* end = nullptr;
    std::shared_ptr<std::FILE> file;
    std::vector<Rec> buf;
    uint64_t left = 0;
    std::string path;

    static Source open(const Run& r, size_t buffer) {
      Source s;
      s.path = r.path;
      s.file.reset(std::fopen(r.path.c_str(), "rb"), [](std::FILE* f) {
        if (f) std::fclose(f);
      });
      DSP_CHECK_T(IoError, s.file != nullptr, "{}: cannot open a sort run", r.path);
      s.buf.resize(buffer);
      s.left = r.count;
      return s;
    }
    // True while a record is at cur (refilling from the file when the buffer is used up).
    bool ready() {
      if (cur != end) return true;
      if (left == 0) return false;
      size_t n = static_cast<size_t>(std::min<uint64_t>(left, buf.size()));
      DSP_CHECK_T(IoError, std::fread(buf.data(), sizeof(Rec), n, file.get()) == n,
                  "{}: short read of a sort run", path);
      left -= n;
      cur = buf.data();
      end = cur + n;
      return true;
    }
  };

  // Sorts the buffer in one contiguous piece per thread (stable, by key) and drops repeats in
  // each; pieces_ holds the kept ranges.
  void sort_pieces() {
    const int64_t t = std::max<int64_t>(1, std::min<int64_t>(num_threads(), size_ / 4096 + 1));
    pieces_.assign(t, {0, 0});
#pragma omp parallel for num_threads(t) schedule(static, 1)
    for (int64_t p = 0; p < t; ++p) {
      Rec* b = buf_.get() + size_ * p / t;
      Rec* e = buf_.get() + size_ * (p + 1) / t;
      auto less = [](const Rec& x, const Rec& y) { return key_of(x) < key_of(y); };
      // Plain keys have no order among equals to keep; stable_sort's buffer (a piece) is counted
      // by callers that sort weighted records.
      if constexpr (std::is_same_v<Rec, uint64_t>) {
        std::sort(b, e);
      } else {
        std::stable_sort(b, e, less);
      }
      Rec* kept =
          std::unique(b, e, [](const Rec& x, const Rec& y) { return key_of(x) == key_of(y); });
      pieces_[p] = {static_cast<size_t>(b - buf_.get()), static_cast<size_t>(kept - buf_.get())};
    }
  }

  void spill() {
    sort_pieces();
    if (!made_dir_) {
      std::error_code ec;
      std::filesystem::create_directories(dir_, ec);
      DSP_CHECK_T(IoError, !ec, "{}: cannot create the sort directory: {}", dir_, ec.message());
      made_dir_ = true;
    }
    for (auto [b, e] : pieces_) {
      RunFile w(dir_ + "/run" + std::to_string(runs_.size()));
      w.write(buf_.get() + b, e - b);
      spilled_ += (e - b) * sizeof(Rec);
      runs_.push_back(w.finish());
      ++spilled_runs_;
    }
    size_ = 0;
  }

  std::string dir_;
  size_t capacity_, size_ = 0;
  std::unique_ptr<Rec[]> buf_;
  std::vector<std::pair<size_t, size_t>> pieces_;
  std::vector<Run> runs_;
  size_t fan_in_;
  int64_t merged_ = 0;
  int spilled_runs_ = 0;
  uint64_t spilled_ = 0;
  bool made_dir_ = false;
};

// Streams the entries of an in-neighbour CSR, given in key order without repeats, into
// `dir`/indptr.npy, `dir`/indices.npy (index_dtype) and, when weighted, `dir`/edge_weight.npy.
class CsrFileWriter {
 public:
  CsrFileWriter(const std::string& dir, int64_t num_nodes, int64_t max_entries, DType index_dtype,
                bool weighted);
  void add(const uint64_t* keys, size_t n);
  void add(const WeightedKey* recs, size_t n);
  // Writes the remaining rows and closes the files.
  void finish();
  int64_t entries() const { return entries_; }
  int64_t max_degree() const { return max_degree_; }

 private:
  void entry(uint64_t key);
  void end_rows_before(int64_t row);
  void flush();
  int64_t n_, rows_ = 0, entries_ = 0, row_start_ = 0, max_degree_ = 0;
  DType index_dtype_;
  NpyWriter indptr_, indices_;
  std::unique_ptr<NpyWriter> weights_;
  std::vector<int64_t> ptr_buf_, idx_buf_;
  std::vector<float> w_buf_;
};

}  // namespace dsp
