// Memory planning of `dsp partition`: --dry-run prints the estimate, a budget below it refuses
// with one line naming what lowers it, `dsp info` prints it too.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "core/memory.hpp"
#include "graph/dataset.hpp"
#include "graph/io_test_util.hpp"
#include "layout/partition/partition_plan.hpp"

namespace dsp {
namespace {
using iotest::run_cli;
using iotest::TempDir;

TEST(PartitionPlan, PartitionDryRunAndRefusal) {
  TempDir tmp("ooc_partition");
  auto r = run_cli("generate community " + tmp / "g" + " --nodes 20000 --edges 200000", tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli("partition " + tmp / "g " + tmp / "p" + " -p 2 --dry-run --memory-budget 1G", tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const DatasetMeta m = load_dataset(tmp / "g").meta;
  PartitionOptions o;
  o.parts = 2;
  const std::string need = format_bytes(estimate_partition_memory(m, o));
  // Figures count the process's resident memory (its libraries), which varies: any number.
  const std::regex dry("partition of " + tmp / "g" + " \\(20000 nodes, " +
                       std::to_string(m.num_edges) +
                       " edge entries\\) into 2 parts by metis: needs about [0-9.]+ MiB of "
                       "memory; budget 1\\.00 GiB \\([0-9.]+ GiB available\\)\n");
  EXPECT_TRUE(std::regex_match(r.out, dry)) << r.out;
  EXPECT_FALSE(std::filesystem::exists(tmp / "p"));
  r = run_cli("partition " + tmp / "g " + tmp / "p" + " -p 2 --memory-budget 65M", tmp);
  EXPECT_EQ(r.exit_code, 1);
  const std::regex line(
      "dsp: error: dsp partition needs about [0-9.]+ MiB of memory but the budget is 65\\.0 MiB "
      "\\([0-9.]+ GiB available\\): use --method bfs-blocks \\(about [0-9.]+ MiB\\) or --method "
      "random \\(about [0-9.]+ MiB\\), or raise --memory-budget\n");
  EXPECT_TRUE(std::regex_match(r.err, line)) << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp / "p"));
  r = run_cli("info " + tmp / "g", tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("memory       dsp partition -p 2 needs about " + need + " (metis)"),
            std::string::npos)
      << r.out;
}

// The writer streams each part's rows through write_chunk_bytes: beyond the assignment, the
// estimate grows with the nodes, not with the adjacency entries (papers100M-sized: 2^31 entries
// and more), and building whole parts in memory costs the largest part's patch on top.
TEST(PartitionPlan, StreamedWriterEstimateDoesNotGrowWithEntries) {
  DatasetMeta m;
  m.num_nodes = 83294967;
  m.num_edges = 2267925586;
  m.index_dtype = DType::kInt32;
  PartitionOptions o;
  o.parts = 2;
  o.method = PartitionMethod::kBfsBlocks;
  const uint64_t n = m.num_nodes, streamed = estimate_partition_memory(m, o);
  // Id maps, scores twice and in-degrees (40 bytes a node), the 64 MiB buffer, 64 MiB of slack.
  EXPECT_EQ(streamed, 40 * n + (uint64_t{64} << 20) + (uint64_t{64} << 20));
  m.num_edges *= 2;
  EXPECT_EQ(estimate_partition_memory(m, o), streamed);
  o.write_chunk_bytes = 0;  // whole parts: the larger part's patch (5/8 of the entries) in memory
  const uint64_t patch = (m.num_edges / 2 + m.num_edges / 8) * 4 + 8 * (n / 2 + n / 8 + 1);
  EXPECT_EQ(estimate_partition_memory(m, o), 40 * n + patch + (uint64_t{64} << 20));
}

}  // namespace
}  // namespace dsp
