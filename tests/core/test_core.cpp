#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/device.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/hash.hpp"
#include "core/huge_pages.hpp"
#include "core/logging.hpp"
#include "core/metrics.hpp"
#include "core/parallel.hpp"
#include "core/rng.hpp"
#include "error_of.hpp"

namespace dsp {
namespace {

TEST(Error, CheckThrowsTypedErrorWithMessageAndLocation) {
  try {
    DSP_CHECK_FORMAT(1 + 1 == 3, "file {}: bad magic", "x.npy");
    FAIL() << "no throw";
  } catch (const FormatError& e) {
    EXPECT_STREQ(e.what(), "file x.npy: bad magic");
    EXPECT_GT(e.line(), 0);
    EXPECT_NE(e.where().find("test_core.cpp"), std::string::npos);
  }
  EXPECT_NO_THROW(DSP_CHECK(true, "never"));
  EXPECT_THROW(DSP_CHECK_ARG(false, "x"), InvalidArgument);
}

TEST(Logging, ParsesLevelsAndRejectsUnknown) {
  EXPECT_EQ(parse_log_level("debug"), LogLevel::kDebug);
  EXPECT_EQ(parse_log_level("WARN"), LogLevel::kWarn);
  EXPECT_THROW(parse_log_level("loud"), InvalidArgument);
}

TEST(Device, Parse) {
  EXPECT_FALSE(Device::parse("cpu").is_cuda());
  EXPECT_EQ(Device::parse("cuda:3").index, 3);
  EXPECT_EQ(Device::parse("cuda:3").str(), "cuda:3");
  EXPECT_THROW(Device::parse("cuda:x"), InvalidArgument);
  EXPECT_EQ(test::error_of<InvalidArgument>([] { Device::parse("tpu"); }),
            "unknown device 'tpu' (cpu, cuda, cuda:<index>)");
}

TEST(Rng, PureFunctionOfKeyAndCounter) {
  uint64_t key = rng_key(42, 1, 2, 3);
  RngStream a(key, 12345), b(key, 12345);
  std::vector<uint32_t> seq;
  for (int i = 0; i < 37; ++i) seq.push_back(a.next_u32());
  for (int i = 0; i < 37; ++i) {
    EXPECT_EQ(seq[i], b.next_u32());
    EXPECT_EQ(seq[i], RngStream(key, 12345).at(i)) << i;
  }
  // Any change of seed, epoch, batch, layer, subject or purpose changes the stream.
  uint32_t x = RngStream(key, 12345).at(0);
  EXPECT_NE(x, RngStream(rng_key(43, 1, 2, 3), 12345).at(0));
  EXPECT_NE(x, RngStream(rng_key(42, 2, 2, 3), 12345).at(0));
  EXPECT_NE(x, RngStream(rng_key(42, 1, 3, 3), 12345).at(0));
  EXPECT_NE(x, RngStream(rng_key(42, 1, 2, 4), 12345).at(0));
  EXPECT_NE(x, RngStream(key, 12346).at(0));
  EXPECT_NE(x, RngStream(key, 12345, 1).at(0));
  EXPECT_NE(x, RngStream(key, 12345 + (uint64_t{1} << 32)).at(0));
}

// blocks<N> computes N Philox blocks side by side: the same words as next_u32 / at().
TEST(Rng, BlocksEqualSequentialDraws) {
  RngStream s(rng_key(9, 8, 7, 6), (uint64_t{3} << 32) + 5, 2);
  uint32_t out[16];
  for (uint32_t b : {0u, 1u, 5u, 1000u}) {
    s.blocks<4>(b, out);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], s.at(4 * b + i)) << b << " " << i;
    s.blocks<3>(b, out);
    for (int i = 0; i < 12; ++i) EXPECT_EQ(out[i], s.at(4 * b + i)) << b << " " << i;
    s.blocks<1>(b, out);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], s.at(4 * b + i)) << b << " " << i;
  }
}

TEST(Rng, KnownAnswerIsStableAcrossBuilds) {
  // Pins the stream definition: a change here silently changes every sampled batch.
  RngStream s(rng_key(0), 0);
  uint32_t first = s.next_u32();
  r123::Philox4x32 gen;
  r123::Philox4x32::ctr_type c = {{0, 0, 0, 0}};
  uint64_t k = rng_key(0);
  r123::Philox4x32::key_type kk = {{static_cast<uint32_t>(k), static_cast<uint32_t>(k >> 32)}};
  EXPECT_EQ(first, gen(c, kk).v[0]);
  // Random123's published known-answer vector for Philox4x32-10 with zero key and counter.
  r123::Philox4x32::key_type zk = {{0, 0}};
  EXPECT_EQ(gen(c, zk).v[0], 0x6627e8d5u);
}

TEST(Rng, UniformIntPassesChiSquare) {
  const int k = 10;
  const int n = 100000;
  std::vector<int> hist(k, 0);
  RngStream s(rng_key(7), 99);
  for (int i = 0; i < n; ++i) {
    auto v = s.uniform_int(k);
    ASSERT_LT(v, static_cast<uint64_t>(k));
    hist[v]++;
  }
  double chi2 = 0, expect = double(n) / k;
  for (int h : hist) chi2 += (h - expect) * (h - expect) / expect;
  EXPECT_LT(chi2, 27.88);  // chi-square, 9 dof, p = 0.001
}

TEST(Rng, Uniform01InRangeWithCorrectMean) {
  RngStream s(rng_key(3), 5);
  double sum = 0;
  for (int i = 0; i < 100000; ++i) {
    double u = s.uniform01();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
}

TEST(Metrics, CountersGaugesTimersToJson) {
  Metrics m;
  m.add("rows", 5);
  m.add("rows", 7);
  m.set("hit_rate", 0.25);
  m.time("gather", 0.5);
  m.time("gather", 1.5);
  EXPECT_EQ(m.counter("rows"), 12);
  EXPECT_EQ(m.timer_count("gather"), 2);
  auto j = m.to_json();
  EXPECT_EQ(j["counters"]["rows"], 12);
  EXPECT_DOUBLE_EQ(j["gauges"]["hit_rate"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(j["timers"]["gather"]["total_s"].get<double>(), 2.0);
  auto path = std::filesystem::temp_directory_path() / "dsp_metrics_test.json";
  m.dump(path.string());
  EXPECT_EQ(nlohmann::json::parse(read_file(path.string()))["counters"]["rows"], 12);
  std::filesystem::remove(path);
}

TEST(StagedDir, NothingAppearsWithoutCommit) {
  auto root = std::filesystem::temp_directory_path() / "dsp_staged_test";
  std::filesystem::remove_all(root);
  auto final_dir = (root / "out").string();
  {
    StagedDir d(final_dir, false);
    write_file_atomic(d.file("a.txt"), "hello");
  }
  EXPECT_FALSE(path_exists(final_dir));
  EXPECT_TRUE(std::filesystem::is_empty(root));
  {
    StagedDir d(final_dir, false);
    write_file_atomic(d.file("a.txt"), "hello");
    d.commit();
  }
  EXPECT_EQ(read_file(final_dir + "/a.txt"), "hello");
  EXPECT_THROW(StagedDir(final_dir, false), IoError);
  {
    StagedDir d(final_dir, true);
    write_file_atomic(d.file("b.txt"), "x");
    d.commit();
  }
  EXPECT_FALSE(path_exists(final_dir + "/a.txt"));
  EXPECT_TRUE(path_exists(final_dir + "/b.txt"));
  std::filesystem::remove_all(root);
}

// The pid of a process that has exited (and been reaped).
pid_t dead_pid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

// Interrupted writes leave <out>.tmp.<pid> (and StagedDir's <out>.old.<pid>); the next write of
// the same output removes those of dead writers, and nothing else.
TEST(AtomicWrite, NextWriteRemovesTempFilesOfDeadWriters) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("dsp_stale_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const pid_t dead = dead_pid(), live = ::getppid();
  auto touch = [&](const std::string& name) { dsp::write_file_atomic((dir / name).string(), "x"); };
  for (const std::string& n :
       {"out.json.tmp." + std::to_string(dead), "out.json.tmp." + std::to_string(live),
        std::string("out.json.tmpx"), "other.json.tmp." + std::to_string(dead)}) {
    touch(n);
  }
  fs::create_directories(dir / ("part.old." + std::to_string(dead)) / "sub");
  fs::create_directories(dir / ("part.tmp." + std::to_string(dead)));
  touch("out.json");
  EXPECT_FALSE(fs::exists(dir / ("out.json.tmp." + std::to_string(dead))));
  EXPECT_TRUE(fs::exists(dir / ("out.json.tmp." + std::to_string(live))));  // a live writer's
  EXPECT_TRUE(fs::exists(dir / "out.json.tmpx"));
  EXPECT_TRUE(fs::exists(dir / ("other.json.tmp." + std::to_string(dead))));  // another output
  {
    dsp::StagedDir staged((dir / "part").string(), false);
    staged.commit();
  }
  EXPECT_FALSE(fs::exists(dir / ("part.old." + std::to_string(dead))));
  EXPECT_FALSE(fs::exists(dir / ("part.tmp." + std::to_string(dead))));
  EXPECT_TRUE(fs::is_directory(dir / "part"));
  fs::remove_all(dir);
}

TEST(MappedFile, MapsContentAndNamesMissingFile) {
  auto p = (std::filesystem::temp_directory_path() / "dsp_map_test.bin").string();
  write_file_atomic(p, "abcdef");
  MappedFile f(p);
  ASSERT_EQ(f.size(), 6u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f.data()), 6), "abcdef");
  std::filesystem::remove(p);
  try {
    MappedFile g("/nonexistent/dsp.bin");
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dsp.bin"), std::string::npos);
  }
}

// Hashing a buffer a piece at a time (the partitioner's checksum, which releases each piece of a
// mapped dataset once hashed) gives update()'s digest, whatever the pieces and the length; the
// pieces cover the buffer once, in order.
TEST(Hasher, PiecesGiveTheDigestOfOneUpdate) {
  std::vector<unsigned char> buf(1000);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<unsigned char>(i * 37 + 11);
  for (size_t n : {size_t{0}, size_t{7}, size_t{31}, size_t{32}, size_t{95}, size_t{999}}) {
    Hasher whole;
    whole.update(buf.data(), n);
    whole.update(buf.data() + 1, 3);  // a second update after: the state carries over alike
    for (size_t piece : {size_t{1}, size_t{32}, size_t{40}, size_t{64}, size_t{4096}}) {
      Hasher h;
      size_t next = 0;
      h.update_pieces(buf.data(), n, piece, [&](size_t offset, size_t bytes) {
        EXPECT_EQ(offset, next);
        next += bytes;
      });
      EXPECT_EQ(next, n);
      h.update(buf.data() + 1, 3);
      EXPECT_EQ(h.digest(), whole.digest()) << n << " bytes in pieces of " << piece;
    }
  }
}

}  // namespace
}  // namespace dsp

#include "core/half.hpp"
namespace dsp {
namespace {
TEST(Half, ConvertsExactly) {
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_to_float(0xc000), -2.0f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_to_float(0x0001), 5.9604644775390625e-08f);  // smallest subnormal
  EXPECT_EQ(half_to_float(0x03ff), 6.097555160522461e-05f);   // largest subnormal
  EXPECT_EQ(half_to_float(0x0000), 0.0f);
  EXPECT_TRUE(std::signbit(half_to_float(0x8000)));
  EXPECT_TRUE(std::isinf(half_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(half_to_float(0x7e00)));
  EXPECT_EQ(half_to_float(0x3555), 0.333251953125f);
}
}  // namespace
}  // namespace dsp

// A huge-page copy equals its source; DSP_HUGE_PAGES=0 makes none (callers read the source).
TEST(HugePages, CopyEqualsSourceAndTheEnvironmentTurnsItOff) {
  std::vector<int32_t> src(1 << 20);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<int32_t>(i * 2654435761u);
  const size_t bytes = src.size() * sizeof(int32_t);
  ::unsetenv("DSP_HUGE_PAGES");
  dsp::HugePageBuffer b = dsp::huge_page_copy(src.data(), bytes, 1.0);
  ASSERT_TRUE(b.data != nullptr);
  EXPECT_EQ(b.bytes, bytes);
  EXPECT_EQ(std::memcmp(b.data.get(), src.data(), bytes), 0);
  ::setenv("DSP_HUGE_PAGES", "0", 1);
  dsp::HugePageBuffer off = dsp::huge_page_copy(src.data(), bytes, 1.0);
  ::unsetenv("DSP_HUGE_PAGES");
  EXPECT_TRUE(off.data == nullptr);
  EXPECT_EQ(off.bytes, 0u);
}

// The VmFlags of the mapping holding `p` in /proc/self/smaps ("rd mr mw me ..."), empty if none.
std::string vm_flags_of(const void* p) {
  std::ifstream f("/proc/self/smaps");
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(f, line)) {
    uintptr_t lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(' ') < line.size()) {
      inside = at >= lo && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

// A file mapping read at random is advised so (MADV_RANDOM: "rr" in its VmFlags) only when it is
// larger than this process's share of the available memory, which the node's rank count divides.
// A loop whose chunks wait (here: sleep, as a page fault's reader does) runs every index exactly
// once, on `depth` threads at once when there are that many chunks, on fewer when there are not,
// and calls nothing for an empty range.
TEST(Parallel, WaitingLoopCoversEveryIndexOnceOnDepthThreads) {
  for (auto [n, grain, depth, threads] :
       {std::tuple<int64_t, int64_t, int, size_t>{1000, 7, 8, 8}, {3, 1, 32, 3}, {5, 100, 4, 1}}) {
    SCOPED_TRACE(n);
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n) + 10);
    std::set<std::thread::id> ids;
    std::mutex m;
    // Each chunk waits (up to 5 s, as a slow page read would) until `threads` threads have
    // entered: loops that do run that many at once pass on any machine load, and one that runs
    // fewer is seen with fewer ids, however long its chunks take.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    dsp::waiting_parallel_for(10, 10 + n, grain, depth, [&](int64_t b, int64_t e) {
      {
        std::lock_guard<std::mutex> lock(m);
        ids.insert(std::this_thread::get_id());
      }
      for (int64_t i = b; i < e; ++i) seen[i] += 1;
      for (;;) {
        {
          std::lock_guard<std::mutex> lock(m);
          if (ids.size() >= threads) break;
        }
        if (std::chrono::steady_clock::now() > until) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
    for (int64_t i = 0; i < n + 10; ++i) ASSERT_EQ(seen[i].load(), i < 10 ? 0 : 1) << i;
    EXPECT_EQ(ids.size(), threads);
  }
  bool called = false;
  dsp::waiting_parallel_for(4, 4, 1, 8, [&](int64_t, int64_t) { called = true; });
  EXPECT_FALSE(called);
}

TEST(HugePages, RandomReadsAdvisedOnlyBeyondTheMemoryShare) {
  ::unsetenv("MPI_LOCALNRANKS");
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("dsp_random_reads_" + std::to_string(::getpid()) + ".bin"))
                               .string();
  dsp::write_file_atomic(path, std::string(size_t{1} << 20, '\3'));
  dsp::MappedFile small(path);
  EXPECT_FALSE(dsp::advise_random_reads(small.data(), small.size(), "rows"));  // 1 MiB fits
  EXPECT_EQ(vm_flags_of(small.data()).find(" rr"), std::string::npos);
  // A billion ranks on the node: 1 MiB is beyond this one's share
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "1000000000", 1);
  dsp::MappedFile large(path);
  ::setenv("DSP_RANDOM_READS", "0", 1);
  EXPECT_FALSE(dsp::advise_random_reads(large.data(), large.size(), "rows"));
  EXPECT_EQ(vm_flags_of(large.data()).find(" rr"), std::string::npos);
  ::unsetenv("DSP_RANDOM_READS");
  EXPECT_TRUE(dsp::advise_random_reads(large.data(), large.size(), "rows"));
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  EXPECT_NE(vm_flags_of(large.data()).find(" rr"), std::string::npos) << vm_flags_of(large.data());
  EXPECT_EQ(large.data()[12345], 3);  // still reads
  std::filesystem::remove(path);
}

// Arrays read at random share the page cache: once their total is noted beyond the share, a
// small one counts as beyond too; DSP_BEYOND_MEMORY=1 says beyond for any size.
TEST(HugePages, ArraysReadAtRandomTogetherCountAsTheirTotal) {
  ::unsetenv("MPI_LOCALNRANKS");
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  EXPECT_FALSE(dsp::beyond_memory_share(1 << 20));
  dsp::note_random_reads(size_t{1} << 62);
  EXPECT_TRUE(dsp::beyond_memory_share(1 << 20));
  dsp::note_random_reads(size_t{1} << 20);
  EXPECT_FALSE(dsp::beyond_memory_share(1 << 20));
  dsp::note_random_reads(0);
  ::setenv("DSP_BEYOND_MEMORY", "1", 1);
  EXPECT_TRUE(dsp::beyond_memory_share(1));
  ::unsetenv("DSP_BEYOND_MEMORY");
  EXPECT_FALSE(dsp::beyond_memory_share(1));
}

// All the copies of a process share one budget (several arrays, several ranks of a node): two
// copies that each fit alone do not fit together, and freeing one makes room again.
TEST(HugePages, CopiesShareOneBudgetPerProcessAndNode) {
  ::unsetenv("DSP_HUGE_PAGES");
  ::unsetenv("MPI_LOCALNRANKS");
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  const size_t avail = dsp::available_memory_bytes();
  ASSERT_GT(avail, size_t{64} << 20);
  const double share = static_cast<double>(size_t{8} << 20) / static_cast<double>(avail);
  std::vector<char> src(size_t{5} << 20, 7);  // 5 MiB: one fits an 8 MiB budget, two do not
  ASSERT_EQ(dsp::huge_page_bytes_held(), 0u);
  dsp::HugePageBuffer a = dsp::huge_page_copy(src.data(), src.size(), share);
  ASSERT_TRUE(a.data != nullptr);
  EXPECT_EQ(dsp::huge_page_bytes_held(), src.size());
  EXPECT_TRUE(dsp::huge_page_copy(src.data(), src.size(), share).data == nullptr);
  a = {};
  EXPECT_EQ(dsp::huge_page_bytes_held(), 0u);
  dsp::HugePageBuffer c = dsp::huge_page_copy(src.data(), src.size(), share);
  EXPECT_TRUE(c.data != nullptr);
  // Two ranks on the node: each gets half, so one 5 MiB copy no longer fits.
  c = {};
  ::setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  EXPECT_TRUE(dsp::huge_page_copy(src.data(), src.size(), share).data == nullptr);
  ::unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
}
