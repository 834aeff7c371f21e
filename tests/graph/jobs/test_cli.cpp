// `dsp convert` and `dsp info` as a user runs them: exit codes and the message on stderr.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/fs.hpp"
#include "graph/dataset.hpp"
#include "graph/dataset_cases.hpp"
#include "graph/hetero.hpp"
#include "graph/io_test_util.hpp"
#include "graph/npy.hpp"

namespace dsp {
namespace {
using iotest::run_cli;
using iotest::TempDir;

void expect_failure(const iotest::CliResult& r, int code, const std::string& needle) {
  EXPECT_EQ(r.exit_code, code) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos)
      << "stderr:   " << r.err << "\nexpected: " << needle;
}

TEST(Cli, ConvertCoraThenInfo) {
  TempDir tmp("cli_cora");
  std::string out = tmp / "cora";
  auto r = run_cli("convert --from ogb " + std::string(DSP_TEST_DATA_DIR) + "/cora " + out, tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2708 nodes, 10556 edge entries"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("peak RSS"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("build CSR"), std::string::npos) << r.out;

  r = run_cli("info --json " + out, tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["num_nodes"], 2708);
  EXPECT_EQ(j["num_edges"], 10556);
  EXPECT_EQ(j["feature_dim"], 1433);
  EXPECT_EQ(j["num_classes"], 7);
  EXPECT_EQ(j["num_train"], 140);
  EXPECT_EQ(j["in_degree"]["zero_degree_nodes"], 0);
  EXPECT_NEAR(j["in_degree"]["mean"].get<double>(), 10556.0 / 2708, 1e-9);
  EXPECT_EQ(j["in_degree"]["max"], 168);

  r = run_cli("info " + out, tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("in-degree    min 1 / mean 3.90"), std::string::npos) << r.out;

  // Converting onto an existing directory needs --overwrite.
  r = run_cli("convert --from ogb " + std::string(DSP_TEST_DATA_DIR) + "/cora " + out, tmp);
  expect_failure(r, 1, "already exists (pass --overwrite");
  r = run_cli(
      "convert --from ogb --overwrite --name c2 " + std::string(DSP_TEST_DATA_DIR) + "/cora " + out,
      tmp);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(load_dataset(out).meta.name, "c2");
  // Partitioning into an existing directory is refused before any work: before the dataset is
  // even read (this one does not exist).
  r = run_cli("partition " + (tmp / "no-such-dataset") + " " + out + " -p 1", tmp);
  expect_failure(r, 1, out + ": already exists (pass --overwrite to replace it)");
}

TEST(Cli, InfoFailsOnEveryBrokenDataset) {
  TempDir tmp("cli_bad");
  for (const auto& c : iotest::break_cases()) {
    SCOPED_TRACE(c.name);
    std::string dir = tmp / c.name;
    write_dataset(iotest::small_dataset(), dir);
    c.do_break(dir);
    expect_failure(run_cli("info " + dir, tmp), 1, "dsp: error: " + dir + "/" + c.expect);
  }
  expect_failure(run_cli("info " + tmp / "missing", tmp), 1, "no such dataset directory");
}

TEST(Cli, ConvertReportsBadInput) {
  TempDir tmp("cli_conv");
  iotest::write_text(tmp / "g.txt", "0 1\n1 2\n2 x\n");
  expect_failure(run_cli("convert --from edgelist " + tmp / "g.txt " + tmp / "out", tmp), 1,
                 tmp / "g.txt:3: bad node id 'x'");
  EXPECT_FALSE(std::filesystem::exists(tmp / "out"));
  iotest::write_text(tmp / "e.txt", "# no edges\n");
  expect_failure(run_cli("convert --from edgelist " + tmp / "e.txt " + tmp / "out", tmp), 1,
                 "empty graph");
  expect_failure(run_cli("convert --from edgelist " + tmp / "none.txt " + tmp / "out", tmp), 1,
                 tmp / "none.txt: missing file");
  iotest::write_text(tmp / "ok.txt", "0 1\n1 5\n");
  expect_failure(
      run_cli("convert --from edgelist --num-nodes 4 " + tmp / "ok.txt " + tmp / "out", tmp), 1,
      "ok.txt:2: node id 5 >= number of nodes 4");
  expect_failure(run_cli("convert --from ogb " + tmp.path() + " " + tmp / "out", tmp), 1,
                 "edge.csv.gz: missing file");
  // Usage errors exit 2.
  EXPECT_EQ(run_cli("convert --from csv " + tmp / "ok.txt " + tmp / "out", tmp).exit_code, 2);
  EXPECT_EQ(run_cli("convert " + tmp / "ok.txt", tmp).exit_code, 2);
  EXPECT_EQ(
      run_cli("convert --from edgelist --split x " + tmp / "ok.txt " + tmp / "out", tmp).exit_code,
      2);
  auto r = run_cli("convert --from edgelist --undirected " + tmp / "ok.txt " + tmp / "out", tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(load_dataset(tmp / "out").meta.num_edges, 4);
  r = run_cli("convert --help", tmp);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--num-nodes"), std::string::npos);
}

// Link prediction from the command line: an edge list split, a generated community graph without
// features or labels, and the refusals (exit 2, one line).
TEST(Cli, LinkSplitConvertAndGenerate) {
  TempDir tmp("cli_link");
  std::string text;
  for (int i = 0; i < 30; ++i)
    text += fmt::format("{} {}\n{} {}\n", i, (i + 1) % 30, i, (i + 7) % 30);
  iotest::write_text(tmp / "g.txt", text);
  auto r = run_cli("convert --from edgelist --undirected --link-split 0.8,0.1,0.1 --seed 4 " +
                       tmp / "g.txt " + tmp / "el",
                   tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("links: train 48 / valid 6 / test 6, negatives 6 / 6"), std::string::npos)
      << r.out;
  EXPECT_EQ(load_dataset(tmp / "el").meta.extra["link_split"]["seed"], 4);
  r = run_cli("info " + tmp / "el", tmp);
  EXPECT_NE(
      r.out.find("link split   train 48 / valid 6 / test 6 edges, negatives valid 6 / test 6\n"),
      std::string::npos)
      << r.out;
  expect_failure(run_cli("convert --from edgelist --out-of-core --link-split 0.8,0.1,0.1 " +
                             tmp / "g.txt " + tmp / "ooc",
                         tmp),
                 2,
                 "dsp: error: --link-split needs the in-memory conversion (the edges are split in "
                 "memory); drop --out-of-core");
  expect_failure(
      run_cli("convert --from ogb --link-split 0.8,0.1,0.1 " + tmp / "g.txt " + tmp / "ogb", tmp),
      2, "dsp: error: --link-split applies to --from edgelist and ogb-hetero only");
  r = run_cli(
      "generate community --nodes 2000 --edges 10000 --features 0 --classes 0 "
      "--link-split 0.85,0.05,0.10 " +
          tmp / "gen",
      tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Hits@K bound"), std::string::npos) << r.out;
  const Dataset ds = load_dataset(tmp / "gen");
  EXPECT_GT(ds.meta.extra["link_hits_bound"].get<double>(), 0.5);
  EXPECT_FALSE(ds.labels.defined());
  expect_failure(
      run_cli("generate community --link-split 0.9,0.2,0 " + tmp / "bad", tmp), 2,
      "dsp: error: --link-split: train + valid + test fractions (0.9 + 0.2 + 0) exceed 1");
}

// An edge list with its node features (--features): written as features.npy row for row, with a
// link split; the file's rows give the node count (isolated last nodes kept), or must equal
// --num-nodes; a bad file is named with its fault.
TEST(Cli, EdgeListWithFeatures) {
  TempDir tmp("cli_features");
  std::string text;
  for (int i = 0; i < 30; ++i) {
    text += fmt::format("{} {}\n{} {}\n", i, (i + 1) % 30, i, (i + 7) % 30);
  }
  iotest::write_text(tmp / "g.txt", text);
  std::vector<float> x(32 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f;
  save_npy(tmp / "x.npy", Array::from_vector(std::move(x), {32, 3}));
  auto r = run_cli("convert --from edgelist --undirected --features " + tmp / "x.npy" +
                       " --link-split 0.8,0.1,0.1 " + tmp / "g.txt " + tmp / "el",
                   tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Dataset ds = load_dataset(tmp / "el");
  EXPECT_EQ(ds.meta.num_nodes, 32);  // nodes 30 and 31 have no edge
  ASSERT_TRUE(ds.features.defined());
  ASSERT_EQ(ds.features.shape(), (std::vector<int64_t>{32, 3}));
  for (int64_t i = 0; i < 32 * 3; ++i) ASSERT_EQ(ds.features.data<float>()[i], 0.5f * i);
  EXPECT_GT(ds.meta.num_link_train, 0);
  expect_failure(run_cli("convert --from edgelist --num-nodes 31 --features " + tmp / "x.npy " +
                             tmp / "g.txt " + tmp / "bad1",
                         tmp),
                 1, "x.npy: has 32 feature rows but the graph has 31 nodes");
  save_npy(tmp / "ids.npy", Array::from_vector(std::vector<int64_t>{1, 2, 3}));
  expect_failure(run_cli("convert --from edgelist --features " + tmp / "ids.npy " + tmp / "g.txt " +
                             tmp / "bad2",
                         tmp),
                 1, "ids.npy: node features must be float32 or float16 [num_nodes, F > 0], got");
  expect_failure(run_cli("convert --from edgelist --out-of-core --features " + tmp / "x.npy " +
                             tmp / "g.txt " + tmp / "bad3",
                         tmp),
                 2, "dsp: error: --features needs the in-memory conversion; drop --out-of-core");
  EXPECT_FALSE(path_exists(tmp / "bad1") || path_exists(tmp / "bad2") || path_exists(tmp / "bad3"));
}

// What used to be accepted without a word: a convert without a split, an output that replaces
// the input, a negative seed.
TEST(Cli, RefusesWhatWouldSilentlyGoWrong) {
  TempDir tmp("cli_refuse");
  const std::string cora = std::string(DSP_TEST_DATA_DIR) + "/cora";
  std::filesystem::copy(cora, tmp / "raw_copy", std::filesystem::copy_options::recursive);
  std::filesystem::remove_all(tmp / "raw_copy/raw/split");
  expect_failure(run_cli("convert --from ogb " + tmp / "raw_copy " + tmp / "ns", tmp), 1,
                 tmp / "raw_copy/raw/split: no split folder");
  EXPECT_FALSE(std::filesystem::exists(tmp / "ns"));
  auto r = run_cli("convert --from ogb --no-split " + tmp / "raw_copy " + tmp / "ns", tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(load_dataset(tmp / "ns").meta.num_train, 0);
  EXPECT_EQ(run_cli("convert --from ogb --no-split --split public " + cora + " " + tmp / "x", tmp)
                .exit_code,
            2);

  // The output must not be the input (or contain it): --overwrite would destroy it.
  r = run_cli("convert --from ogb " + cora + " " + tmp / "c", tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string out : {tmp / "c", tmp / "c/.", tmp / "c/../c/", tmp.path()}) {
    SCOPED_TRACE(out);
    expect_failure(run_cli("partition " + tmp / "c " + out + " --parts 2 --overwrite", tmp), 2,
                   "is the dataset " + tmp / "c" +
                       " or contains it: writing the partition there would destroy the dataset");
  }
  EXPECT_EQ(load_dataset(tmp / "c").meta.num_nodes, 2708);  // intact
  expect_failure(
      run_cli("convert --from ogb --overwrite " + tmp / "raw_copy " + tmp / "raw_copy", tmp), 2,
      "writing there would destroy the input");
  EXPECT_TRUE(std::filesystem::exists(tmp / "raw_copy/raw/edge.csv.gz"));

  // Seeds are non-negative: -1 must not wrap to 2^64 - 1.
  std::vector<std::string> cmds = {"partition " + tmp / "c " + tmp / "p --parts 2",
                                   "generate rmat " + tmp / "g"};
  if (run_cli("--help", tmp).out.find("\n  train ") != std::string::npos) {  // built with LibTorch
    cmds.push_back("train " + tmp / "c --epochs 1");
  }
  for (const std::string& cmd : cmds) {
    SCOPED_TRACE(cmd);
    expect_failure(run_cli(cmd + " --seed -1", tmp), 2,
                   "--seed: must be a non-negative integer, got '-1'");
  }
  // A count with trailing junk is refused, not read as its leading digits.
  r = run_cli("partition " + tmp / "c " + tmp / "p1 --parts 1", tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_failure(run_cli("bench cache " + tmp / "p1 --presample-epochs 2x", tmp), 2,
                 "--presample-epochs: '2x' is not an integer");
}

// A file the process may not read is reported as such, not as a missing file (as root, the
// check runs as 'nobody' in a child process).
TEST(Cli, PermissionErrorIsNotAMissingFile) {
  TempDir tmp("cli_perm");
  const std::string dir = tmp / "ds";
  write_dataset(iotest::small_dataset(), dir);
  ::chmod(tmp.path().c_str(), 0755);
  ::chmod(dir.c_str(), 0755);
  ::chmod((dir + "/features.npy").c_str(), 0);
  auto load_as_nobody = [&]() -> std::string {
    int fd[2];
    if (::pipe(fd) != 0) return "pipe failed";
    pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fd[0]);
      std::string msg = "loaded";
      if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) msg = "setuid failed";
      try {
        LoadOptions lo;
        lo.validate = false;  // no OpenMP in a forked child; the fault is found before
        if (msg == "loaded") load_dataset(dir, lo);
      } catch (const Error& e) {
        msg = e.what();
      }
      (void)!::write(fd[1], msg.data(), msg.size());
      ::_exit(0);
    }
    ::close(fd[1]);
    std::string out;
    char buf[512];
    for (ssize_t k; (k = ::read(fd[0], buf, sizeof(buf))) > 0;) out.append(buf, k);
    ::close(fd[0]);
    ::waitpid(pid, nullptr, 0);
    return out;
  };
  const std::string msg = load_as_nobody();
  EXPECT_EQ(msg, dir + "/features.npy: cannot read: Permission denied");
  ::chmod((dir + "/features.npy").c_str(), 0644);
  std::filesystem::remove(dir + "/features.npy");
  EXPECT_EQ(load_as_nobody(), dir + "/features.npy: missing file");
}

// dsp generate hetero and dsp convert --from ogb-hetero as a user runs them: the summary, the
// dataset written, and the errors of each.
TEST(Cli, HeteroGenerateAndConvert) {
  TempDir tmp("cli_hetero");
  const std::string out = tmp / "mag";
  auto r = run_cli(
      "generate hetero --papers 600 --authors 400 --institutions 20 --fields 50 -c 4 " + out, tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("hetero graph 'hetero': 1070 nodes of 4 types, 8 relations"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("paper___rev_cites___paper"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 classes on paper, train/valid/test 60/30/510, accuracy bound 0.925"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(load_hetero_dataset(out).schema.num_relations(), 8);
  r = run_cli("generate hetero --papers 600 --no-reverse " + out, tmp);
  expect_failure(r, 1, out + ": already exists (pass --overwrite to replace it)");
  r = run_cli("generate hetero --papers 600 --no-reverse --overwrite " + out, tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(load_hetero_dataset(out).schema.num_relations(), 4);
  expect_failure(run_cli("generate hetero --intra 2 " + tmp / "x", tmp), 2,
                 "--intra 2 is outside [0, 1]");

  const std::string raw = tmp / "ogbn_small/raw";
  iotest::write_gz(raw + "/num-node-dict.csv.gz", "author,paper\n2,3\n");
  iotest::write_gz(raw + "/relations/author___writes___paper/edge.csv.gz", "0,0\n1,2\n");
  iotest::write_gz(raw + "/relations/paper___cites___paper/edge.csv.gz", "1,0\n2,1\n");
  iotest::write_gz(raw + "/node-label/paper/node-label.csv.gz", "0\n1\n0\n");
  for (const char* part : {"train", "valid", "test"}) {
    iotest::write_gz(tmp / "ogbn_small/split/random/paper/" + part + ".csv.gz",
                     std::string(part) == "train"   ? "0\n"
                     : std::string(part) == "valid" ? "1\n"
                                                    : "2\n");
  }
  r = run_cli("convert --from ogb-hetero --add-reverse " + tmp / "ogbn_small " + tmp / "conv", tmp);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("ogbn_small: 5 nodes of 2 types, 8 edge entries in 4 relations (4 input "
                       "edges)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("split: train 1 / valid 1 / test 1"), std::string::npos) << r.out;
  EXPECT_EQ(load_hetero_dataset(tmp / "conv").schema.relations[3].key(),
            "paper___rev_cites___paper");
  iotest::write_gz(raw + "/relations/paper___cites___paper/edge.csv.gz", "1,0\n2,3\n");
  expect_failure(
      run_cli("convert --from ogb-hetero " + tmp / "ogbn_small " + tmp / "conv2", tmp), 1,
      raw +
          "/relations/paper___cites___paper/edge.csv.gz:2: destination id 3 is outside paper's "
          "3 ids");
  expect_failure(
      run_cli("convert --from ogb-hetero --directed " + tmp / "ogbn_small " + tmp / "c3", tmp), 2,
      "--directed does not apply to --from ogb-hetero");
}

}  // namespace
}  // namespace dsp
