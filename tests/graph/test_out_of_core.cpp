// The out-of-core paths (external sort on disk, streamed node data) against the in-memory ones:
// identical files, byte for byte, and the memory planner's choice and refusal.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <string>

#include "core/error.hpp"
#include "core/memory.hpp"
#include "graph/dataset.hpp"
#include "graph/external_sort.hpp"
#include "graph/generate.hpp"
#include "graph/import.hpp"
#include "graph/io_test_util.hpp"
#include "graph/npy.hpp"
#include "error_of.hpp"

namespace dsp {
namespace {
using test::error_of;
using iotest::run_cli;
using iotest::slurp;
using iotest::TempDir;

// Every file of a directory (name -> bytes).
std::map<std::string, std::string> files_of(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out[e.path().filename().string()] = slurp(e.path().string());
  }
  return out;
}

void expect_same_files(const std::string& a, const std::string& b) {
  auto fa = files_of(a), fb = files_of(b);
  ASSERT_FALSE(fa.empty());
  ASSERT_EQ(fa.size(), fb.size());
  for (const auto& [name, bytes] : fa) {
    ASSERT_TRUE(fb.count(name)) << name;
    EXPECT_TRUE(fb[name] == bytes) << name << " differs";
  }
}

// `dsp convert --memory-budget 64M` refused with the one-line message, nothing left at `out`.
void expect_convert_refused_at_64m(const iotest::CliResult& r, const std::string& out) {
  EXPECT_EQ(r.exit_code, 1);
  const std::regex line(
      "dsp: error: dsp convert \\(out of core\\) needs about [0-9.]+ MiB of memory but the budget "
      "is 64\\.0 MiB \\([0-9.]+ [KMG]iB available\\): raise --memory-budget\n");
  EXPECT_TRUE(std::regex_match(r.err, line)) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

GenerateWriteOptions in_memory() {
  GenerateWriteOptions w;
  w.memory_budget = uint64_t{1} << 40;
  return w;
}

// Out of core with a sort buffer of 64 KiB, so the edges spill into many runs.
GenerateWriteOptions out_of_core() {
  GenerateWriteOptions w = in_memory();
  w.force_out_of_core = true;
  w.sort_buffer_bytes = 64 << 10;
  return w;
}

TEST(OutOfCore, RmatFilesIdenticalToInMemory) {
  TempDir tmp("ooc_rmat");
  struct Case {
    bool undirected, permute;
    DType dtype;
    int64_t classes;
  } cases[] = {{false, true, DType::kFloat32, 5},
               {true, true, DType::kFloat16, 3},
               {true, false, DType::kFloat32, 0}};
  int i = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(i);
    RmatOptions o;
    o.num_nodes = 3000;
    o.num_edges = 60000;
    o.feature_dim = 12;
    o.feature_dtype = c.dtype;
    o.num_classes = c.classes;
    o.undirected = c.undirected;
    o.permute = c.permute;
    o.seed = 11 + i;
    const std::string a = tmp / ("mem" + std::to_string(i)), b = tmp / ("ooc" + std::to_string(i));
    GenerateResult ra = write_rmat(o, a, in_memory());
    GenerateResult rb = write_rmat(o, b, out_of_core());
    EXPECT_FALSE(ra.out_of_core);
    EXPECT_TRUE(rb.out_of_core);
    EXPECT_GT(rb.sort_runs, 4);  // the merge of many runs is what is tested
    EXPECT_EQ(ra.max_in_degree, rb.max_in_degree);
    expect_same_files(a, b);
    EXPECT_FALSE(std::filesystem::exists(b + "/sort-runs"));
    load_dataset(b);  // and it validates
    ++i;
  }
}

TEST(OutOfCore, CommunityFilesIdenticalToInMemory) {
  TempDir tmp("ooc_comm");
  CommunityOptions o;
  o.num_nodes = 4000;
  o.num_edges = 40000;
  o.num_communities = 16;
  o.feature_dim = 10;
  o.feature_dtype = DType::kFloat16;
  o.num_classes = 4;
  o.seed = 5;
  GenerateResult ra = write_community(o, tmp / "mem", in_memory());
  GenerateResult rb = write_community(o, tmp / "ooc", out_of_core());
  EXPECT_GT(rb.sort_runs, 4);
  EXPECT_EQ(ra.meta.to_json(), rb.meta.to_json());
  expect_same_files(tmp / "mem", tmp / "ooc");
  // One buffer that holds every edge: merged from memory, no run on disk.
  GenerateWriteOptions w = in_memory();
  w.force_out_of_core = true;
  GenerateResult rc = write_community(o, tmp / "one", w);
  EXPECT_EQ(rc.sort_runs, 0);
  expect_same_files(tmp / "mem", tmp / "one");
}

// The split sizes come from one function on both paths: a preset with nodes in no split, and a
// test fraction, write the same files in memory and out of core.
TEST(OutOfCore, SplitFractionsFilesIdenticalToInMemory) {
  TempDir tmp("ooc_splits");
  RmatOptions r;
  r.num_nodes = 300000;  // the papers100m test split: 579 nodes
  r.num_edges = 200000;
  r.feature_dim = 4;
  r.num_classes = 3;
  const SplitFractions f = split_preset(SplitPreset::kPapers100m);
  r.train_frac = f.train, r.valid_frac = f.valid, r.test_frac = f.test;
  GenerateResult ra = write_rmat(r, tmp / "rmat_mem", in_memory());
  GenerateResult rb = write_rmat(r, tmp / "rmat_ooc", out_of_core());
  EXPECT_TRUE(rb.out_of_core);
  EXPECT_EQ(rb.meta.num_train + rb.meta.num_valid + rb.meta.num_test, 3261 + 338 + 579);
  EXPECT_EQ(ra.meta.to_json(), rb.meta.to_json());
  expect_same_files(tmp / "rmat_mem", tmp / "rmat_ooc");

  CommunityOptions c;
  c.num_nodes = 4000;
  c.num_edges = 40000;
  c.num_communities = 16;
  c.feature_dim = 6;
  c.test_frac = 0.2;
  GenerateResult ca = write_community(c, tmp / "comm_mem", in_memory());
  GenerateResult cb = write_community(c, tmp / "comm_ooc", out_of_core());
  EXPECT_EQ(cb.meta.num_test, 800);
  EXPECT_EQ(ca.meta.to_json(), cb.meta.to_json());
  expect_same_files(tmp / "comm_mem", tmp / "comm_ooc");
  load_dataset(tmp / "comm_ooc");  // and it validates
}

// A budget between the two estimates picks the out-of-core path by itself.
TEST(OutOfCore, BudgetBelowTheInMemoryEstimateGoesOutOfCore) {
  TempDir tmp("ooc_choice");
  RmatOptions o;
  o.num_nodes = 20000;
  o.num_edges = 100000;
  o.feature_dim = 512;  // 40 MB of features: in memory needs far more than out of core
  o.num_classes = 3;
  MemoryEstimate e = estimate_rmat_memory(o);
  ASSERT_LT(e.out_of_core, e.in_memory);
  // Budgets count the process's resident memory too.
  GenerateWriteOptions w;
  w.memory_budget = process_rss_bytes() + (e.in_memory + e.out_of_core) / 2;
  GenerateResult r = write_rmat(o, tmp / "auto", w);
  EXPECT_TRUE(r.out_of_core);
  w.memory_budget = process_rss_bytes() + e.in_memory + (8 << 20);
  r = write_rmat(o, tmp / "mem", w);
  EXPECT_FALSE(r.out_of_core);
  expect_same_files(tmp / "auto", tmp / "mem");
}

TEST(OutOfCore, RefusesWithOneLineWhenNothingFits) {
  TempDir tmp("ooc_refuse");
  auto r = run_cli(
      "generate community " + tmp / "g" + " --nodes 2M --edges 10M --memory-budget 64M", tmp);
  EXPECT_EQ(r.exit_code, 1);
  CommunityOptions o;
  o.num_nodes = 2000000;
  o.num_edges = 10000000;
  EXPECT_GT(estimate_community_memory(o).out_of_core, uint64_t{64} << 20);
  // The need counts the process's resident memory (libraries), which varies: any figure.
  const std::regex line(
      "dsp: error: dsp generate \\(out of core\\) needs about [0-9.]+ MiB of memory but the budget "
      "is 64\\.0 MiB \\([0-9.]+ [KMG]iB available\\): lower --nodes or raise --memory-budget\n");
  EXPECT_TRUE(std::regex_match(r.err, line)) << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp / "g"));
  r = run_cli("generate rmat " + tmp / "g" + " --memory-budget 12X", tmp);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--memory-budget: expected a size such as 512M, 12G or 1.5GiB, got '12X'"),
            std::string::npos)
      << r.err;
}

TEST(OutOfCore, RefusesWhenTheDiskCannotHoldIt) {
  TempDir tmp("ooc_disk");
  // 4 TB of features: out of core in memory, but not on this disk.
  auto r = run_cli("generate rmat " + tmp / "g" + " --nodes 1M --edges 1M --features 1000000", tmp);
  EXPECT_EQ(r.exit_code, 1);
  const std::regex line(
      "dsp: error: dsp generate \\(out of core: sorted runs, then the output\\) needs about "
      "[0-9.]+ GiB of disk in " +
      tmp.path() +
      " but [0-9.]+ [KMG]iB is free: lower --edges or --features, or write elsewhere\n");
  EXPECT_TRUE(std::regex_match(r.err, line)) << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp / "g"));
}

TEST(OutOfCore, CliReportsTheOutOfCorePath) {
  TempDir tmp("ooc_cli");
  auto r = run_cli(
      "generate rmat " + tmp / "g" + " --nodes 2000 --edges 20000 --out-of-core --sort-buffer 64K",
      tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("generated out of core in"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("sorted runs"), std::string::npos) << r.out;
}

TEST(OutOfCore, ParseBytes) {
  EXPECT_EQ(parse_bytes("--x", "512"), 512u);
  EXPECT_EQ(parse_bytes("--x", "64K"), 64u << 10);
  EXPECT_EQ(parse_bytes("--x", "1.5GiB"), uint64_t{3} << 29);
  EXPECT_EQ(parse_bytes("--x", "12g"), uint64_t{12} << 30);
  EXPECT_EQ(parse_bytes("--x", "2MB"), 2u << 20);
  EXPECT_THROW(parse_bytes("--x", "-1G"), InvalidArgument);
  EXPECT_THROW(parse_bytes("--x", "G"), InvalidArgument);
  EXPECT_THROW(parse_bytes("--x", "3Q"), InvalidArgument);
  EXPECT_EQ(format_bytes(3u << 29), "1.50 GiB");
}

// The header written for the bound is replaced by the one for the real row count (fewer
// digits): the file equals save_npy's.
TEST(OutOfCore, NpyWriterRewritesTheHeaderForTheFinalLength) {
  TempDir tmp("ooc_npy");
  for (int64_t bound : {int64_t{40}, int64_t{1} << 40}) {
    SCOPED_TRACE(bound);
    std::vector<int64_t> v(37);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int64_t>(i * i);
    NpyWriter w(tmp / "a.npy", DType::kInt64, {bound, 1});
    w.write(v.data(), v.size() * 8);
    w.close_with_first_dim(37);
    save_npy(tmp / "b.npy", Array::from_vector(v, {37, 1}));
    EXPECT_TRUE(slurp(tmp / "a.npy") == slurp(tmp / "b.npy"));
  }
}

// Sorts `records` records over `keys` keys (key k's weights in push order) with a 1024-record
// buffer merged at most `fan_in` runs at a time; the result must hold every key once, in order,
// with its first weight, and leave no run files behind. Returns the runs spilled.
int sort_and_check_first_weights(const std::filesystem::path& dir, int records, int keys,
                                 size_t fan_in) {
  std::map<uint64_t, float> first;
  std::vector<WeightedKey> out;
  int runs = 0;
  {
    ExternalSorter<WeightedKey> s(dir.string(), 1024, fan_in);
    for (int i = 0; i < records; ++i) {
      WeightedKey* r = s.append_space(1);
      const uint64_t k = edge_key(static_cast<uint64_t>((i * 7919) % keys), i % 3);
      r->key = k;
      r->weight = static_cast<float>(i);
      first.emplace(k, r->weight);
      s.appended(1);
    }
    s.merge([&](const WeightedKey* r, size_t n) { out.insert(out.end(), r, r + n); });
    runs = s.runs();
    EXPECT_FALSE(std::filesystem::exists(dir));
  }
  EXPECT_EQ(out.size(), first.size());
  size_t i = 0;
  for (const auto& [k, w] : first) {
    if (i >= out.size()) break;
    EXPECT_EQ(out[i].key, k);
    EXPECT_EQ(out[i].weight, w);
    ++i;
  }
  return runs;
}

TEST(OutOfCore, SorterKeepsTheFirstWeightOfRepeats) {
  TempDir tmp("ooc_sort");
  EXPECT_GT(
      sort_and_check_first_weights(tmp / "runs", 5000, 300, ExternalSorter<WeightedKey>::kMaxFanIn),
      4);
}

// More runs than the sorter opens at once: they are merged in consecutive groups first (three
// levels at fan-in 3), with the same result as one merge.
TEST(OutOfCore, SorterMergesManyRunsInGroups) {
  TempDir tmp("ooc_sort_groups");
  for (size_t fan_in : {size_t{3}, size_t{4}, size_t{1000}}) {
    SCOPED_TRACE(fan_in);
    EXPECT_GT(sort_and_check_first_weights(tmp / "runs", 40000, 4001, fan_in), 27);
  }
}

// An edge list with repeats (weights differing between them), self loops, comments and blank
// lines; ids up to `n - 1`.
std::string edge_list_text(int64_t n, int64_t m, bool weighted, uint64_t seed) {
  std::string text = "# a test edge list\n\n";
  uint64_t x = seed * 2654435761u + 1;
  auto next = [&] {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
  };
  for (int64_t i = 0; i < m; ++i) {
    int64_t s = static_cast<int64_t>(next() % n), t = static_cast<int64_t>(next() % n);
    if (i % 97 == 0) t = s;            // a self loop
    if (i % 13 == 0) t = (s + 1) % n;  // many repeats of (s, s + 1)
    text += std::to_string(s) + " " + std::to_string(t);
    if (weighted) text += " " + std::to_string(static_cast<double>(i % 1000) / 8.0);
    text += i % 50 == 0 ? "  # trailing comment\n" : "\n";
  }
  return text;
}

TEST(OutOfCore, EdgeListConvertIdenticalToInMemory) {
  TempDir tmp("ooc_convert");
  struct Case {
    bool weighted, undirected, no_self_loops, gz;
    int64_t num_nodes;
  } cases[] = {{false, false, false, false, -1},
               {true, false, true, true, -1},
               {true, true, false, false, 3000},
               {false, true, true, true, 2500}};
  int i = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(i);
    const std::string in = tmp / ("e" + std::to_string(i) + (c.gz ? ".txt.gz" : ".txt"));
    const std::string text = edge_list_text(2500, 30000, c.weighted, 3 + i);
    if (c.gz) {
      iotest::write_gz(in, text);
    } else {
      iotest::write_text(in, text);
    }
    EdgeListOptions o;
    o.num_nodes = c.num_nodes;
    o.undirected = c.undirected;
    o.remove_self_loops = c.no_self_loops;
    const std::string a = tmp / ("mem" + std::to_string(i)), b = tmp / ("ooc" + std::to_string(i));
    write_dataset(import_edge_list(in, o, "g"), a);
    OutOfCoreImportOptions w;
    w.memory_budget = uint64_t{1} << 40;
    w.sort_buffer_bytes = 64 << 10;
    ImportStats st;
    DatasetMeta m = import_edge_list_to_dir(in, o, "g", b, w, &st);
    EXPECT_EQ(st.input_edges, 30000);
    EXPECT_EQ(m.has_weights, c.weighted);
    expect_same_files(a, b);
    EXPECT_FALSE(std::filesystem::exists(b + "/sort-runs"));
    ++i;
  }
}

// What write_dataset refuses (a negative weight) is refused out of core too, with the same
// message, and nothing is left at the output.
TEST(OutOfCore, EdgeListRejectedLikeInMemory) {
  TempDir tmp("ooc_convert_bad");
  iotest::write_text(tmp / "e.txt", "0 1 1.5\n1 2 -2\n2 0 1\n");
  std::string mem_error, ooc_error;
  try {
    write_dataset(import_edge_list(tmp / "e.txt", {}, "g"), tmp / "out");
  } catch (const FormatError& e) {
    mem_error = e.what();
  }
  OutOfCoreImportOptions w;
  w.memory_budget = uint64_t{1} << 40;
  try {
    import_edge_list_to_dir(tmp / "e.txt", {}, "g", tmp / "out", w);
  } catch (const FormatError& e) {
    ooc_error = e.what();
  }
  EXPECT_NE(mem_error, "");
  EXPECT_EQ(mem_error, ooc_error);
  EXPECT_FALSE(std::filesystem::exists(tmp / "out"));
}

TEST(OutOfCore, ConvertCliChoosesAndRefuses) {
  TempDir tmp("ooc_convert_cli");
  iotest::write_text(tmp / "e.txt", edge_list_text(1000, 20000, true, 9));
  auto r = run_cli("convert --from edgelist " + tmp / "e.txt " + tmp / "mem", tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli(
      "convert --from edgelist --out-of-core --sort-buffer 64K " + tmp / "e.txt " + tmp / "ooc",
      tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_same_files(tmp / "mem", tmp / "ooc");
  // The in-memory estimate is 64 MiB of slack plus the edges: over a 64M budget, which the
  // out-of-core path's minimum (parse buffers, 64 MiB of slack, a sort buffer) exceeds too.
  r = run_cli("convert --from edgelist --memory-budget 64M " + tmp / "e.txt " + tmp / "x", tmp);
  expect_convert_refused_at_64m(r, tmp / "x");
}

// Out of core with a sort buffer of 1024 keys: Cora's 5278 edges spill into many runs.
OutOfCoreImportOptions tiny_sort_buffer() {
  OutOfCoreImportOptions w;
  w.memory_budget = uint64_t{1} << 40;
  w.sort_buffer_bytes = 8 << 10;
  return w;
}

TEST(OutOfCore, OgbConvertIdenticalToInMemory) {
  TempDir tmp("ooc_ogb");
  const std::string cora = std::string(DSP_TEST_DATA_DIR) + "/cora";
  std::filesystem::copy(cora, tmp / "nosplit", std::filesystem::copy_options::recursive);
  std::filesystem::remove_all(tmp / "nosplit/raw/split");
  struct Case {
    std::string input;
    bool undirected, require_split;
  } cases[] = {{cora, true, true}, {cora, false, true}, {tmp / "nosplit", true, false}};
  int i = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(i);
    OgbImportOptions o;
    o.undirected = c.undirected;
    o.require_split = c.require_split;
    const std::string a = tmp / ("mem" + std::to_string(i)), b = tmp / ("ooc" + std::to_string(i));
    Dataset ds = import_ogb_raw(c.input, o);
    write_dataset(ds, a);
    ImportStats st;
    DatasetMeta m = import_ogb_to_dir(c.input, o, b, tiny_sort_buffer(), &st);
    EXPECT_GT(st.sort_runs, 4);  // the merge of many runs is what is tested
    EXPECT_EQ(st.input_edges, 5278);
    EXPECT_EQ(m.to_json(), ds.meta.to_json());
    EXPECT_EQ(m.num_train > 0, c.require_split);
    expect_same_files(a, b);
    EXPECT_FALSE(std::filesystem::exists(b + "/sort-runs"));
    load_dataset(b);  // and it validates
    ++i;
  }
}

// Faulty OGB inputs fail out of core with the in-memory path's one line, leaving nothing at the
// output (nor a staging directory).
TEST(OutOfCore, OgbRejectedLikeInMemory) {
  TempDir tmp("ooc_ogb_bad");
  const std::string root = tmp / "in/d", out = tmp / "out/d";
  std::filesystem::create_directories(tmp / "out");
  auto write_ogb = [&](const std::string& edges, int64_t n, int64_t m, const std::string& feat) {
    std::filesystem::remove_all(root);
    iotest::write_gz(root + "/raw/edge.csv.gz", edges);
    iotest::write_gz(root + "/raw/num-node-list.csv.gz", std::to_string(n) + "\n");
    iotest::write_gz(root + "/raw/num-edge-list.csv.gz", std::to_string(m) + "\n");
    iotest::write_gz(root + "/raw/node-feat.csv.gz", feat);
    iotest::write_gz(root + "/raw/split/s/train.csv.gz", "0\n");
    iotest::write_gz(root + "/raw/split/s/valid.csv.gz", "1\n");
    iotest::write_gz(root + "/raw/split/s/test.csv.gz", "2\n");
  };
  struct Case {
    std::string edges;
    int64_t m;
    std::string feat, expect;
  } cases[] = {
      {"0,1\n1,2\n", 3, "1,2\n3,4\n5,6\n", "has 2 edges but " + root + "/raw/num-edge-list"},
      {"0,1\n1,3\n", 2, "1,2\n3,4\n5,6\n", "edge.csv.gz:2: node id 3 >= number of nodes 3"},
      {"0,1,2\n1,2,3\n", 2, "1,2\n3,4\n5,6\n", "expected two columns 'src,dst', got three"},
      {"0,1\n1,2\n", 2, "1,2\n3,4\n5\n", "node-feat.csv.gz:3: expected 2 columns, got 1"},
      {"0,1\n1,2\n", 2, "1,2\n3,4\n5,6\n7,8\n", "node-feat.csv.gz: has 4 rows but the graph has 3"},
      {"0,1\n1,2\n", 2, "1,2\n,4\n5,6\n",  // an empty field is NaN: named in the input
       "node-feat.csv.gz: feature 0 (column 1) of node 1 is NaN (or an empty field)"},
      {"0,1\n1,2\n", 2, "1,2\n3,4\n5,6\n", "valid.csv.gz: missing file"},
      {"0,1\n1,2\n", 2, "1,2\n3,4\n5,6\n", "edge.csv.gz: missing file"}};
  int i = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expect);
    write_ogb(c.edges, 3, c.m, c.feat);
    if (i == 6) std::filesystem::remove(root + "/raw/split/s/valid.csv.gz");
    if (i == 7) std::filesystem::remove(root + "/raw/edge.csv.gz");
    const std::string mem = error_of([&] { write_dataset(import_ogb_raw(root, {}), out); });
    EXPECT_FALSE(std::filesystem::exists(out));
    const std::string ooc = error_of([&] { import_ogb_to_dir(root, {}, out, tiny_sort_buffer()); });
    EXPECT_NE(mem.find(c.expect), std::string::npos) << mem;
    EXPECT_EQ(mem, ooc);
    EXPECT_EQ(mem.find('\n'), std::string::npos) << mem;
    EXPECT_FALSE(std::filesystem::exists(out));
    EXPECT_TRUE(std::filesystem::is_empty(tmp / "out"));  // no staging directory left
    ++i;
  }
  // The fixture is sound: without a fault both paths succeed.
  write_ogb("0,1\n1,2\n", 3, 2, "1,2\n3,4\n5,6\n");
  write_dataset(import_ogb_raw(root, {}), tmp / "mem");
  import_ogb_to_dir(root, {}, out, tiny_sort_buffer());
  expect_same_files(tmp / "mem", out);
}

TEST(OutOfCore, OgbConvertCliChoosesAndRefuses) {
  TempDir tmp("ooc_ogb_cli");
  const std::string cora = std::string(DSP_TEST_DATA_DIR) + "/cora ";
  auto r = run_cli("convert --from ogb " + cora + tmp / "mem", tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("out of core"), std::string::npos) << r.out;
  r = run_cli("convert --from ogb --out-of-core --sort-buffer 8K " + cora + tmp / "ooc", tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2708 nodes, 10556 edge entries (5278 input edges"), std::string::npos)
      << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("out of core: ([5-9]|[1-9][0-9]+) sorted runs")))
      << r.out;
  expect_same_files(tmp / "mem", tmp / "ooc");
  // Cora's in-memory estimate (64 MiB of slack, features, graph) is over a 64M budget, and so is
  // the out-of-core minimum (parse buffers, slack): the one-line refusal, nothing written.
  r = run_cli("convert --from ogb --memory-budget 64M " + cora + tmp / "x", tmp);
  expect_convert_refused_at_64m(r, tmp / "x");
}

}  // namespace
}  // namespace dsp
