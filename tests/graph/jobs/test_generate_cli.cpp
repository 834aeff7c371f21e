// `dsp generate` end to end (gate tier, tests/graph/jobs): the CLI writes what the library
// generates, refuses bad flags, and its split flags give the library's splits.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/error.hpp"
#include "graph/dataset.hpp"
#include "graph/generate.hpp"
#include "graph/generate_checks.hpp"
#include "graph/io_test_util.hpp"

namespace dsp {
namespace {

using gentest::expect_split_sizes;
using gentest::same_dataset;

// Runs `dsp <args>` quietly and returns its exit code.
int run_dsp(const std::string& args) {
  std::string cmd = std::string(DSP_CLI_PATH) + " " + args + " >/dev/null 2>&1";
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

TEST(GenerateCli, WritesWhatTheLibraryGeneratesAndRejectsBadFlags) {
  namespace fs = std::filesystem;
  const fs::path tmp =
      fs::temp_directory_path() / ("dsp_generate_cli_" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  const std::string comm_dir = (tmp / "community").string(), rmat_dir = (tmp / "rmat").string();

  ASSERT_EQ(run_dsp("generate community " + comm_dir +
                    " -n 3k -m 20k -k 8 -c 4 -f 16 -s 3 --intra 0.8 --name tiny"),
            0);
  Dataset loaded = load_dataset(comm_dir);
  CommunityOptions co;
  co.num_nodes = 3000;
  co.num_edges = 20000;
  co.num_communities = 8;
  co.num_classes = 4;
  co.feature_dim = 16;
  co.seed = 3;
  co.intra_fraction = 0.8;
  Dataset expect = generate_community(co);
  EXPECT_TRUE(same_dataset(loaded, expect));
  EXPECT_EQ(loaded.meta.name, "tiny");
  EXPECT_FALSE(loaded.meta.directed);
  EXPECT_EQ(loaded.meta.extra.at("generator"), "community");
  EXPECT_EQ(loaded.meta.extra.at("seed").get<uint64_t>(), 3u);

  // OUT exists: refused (before generating) unless --overwrite.
  EXPECT_EQ(run_dsp("generate community " + comm_dir + " -n 1000 -m 1000"), 1);
  EXPECT_EQ(run_dsp("generate community " + comm_dir + " -n 1000 -m 1000 --overwrite"), 0);
  EXPECT_EQ(load_dataset(comm_dir).meta.num_nodes, 1000);

  ASSERT_EQ(run_dsp("generate rmat " + rmat_dir +
                    " --nodes 4096 --edges 40000 --features 0 --classes 0 --seed 9 --undirected"),
            0);
  Dataset rmat = load_dataset(rmat_dir);
  RmatOptions ro;
  ro.num_nodes = 4096;
  ro.num_edges = 40000;
  ro.seed = 9;
  ro.undirected = true;
  EXPECT_TRUE(same_dataset(rmat, generate_rmat(ro)));
  EXPECT_FALSE(rmat.features.defined());

  const std::string bad = (tmp / "bad").string();
  EXPECT_EQ(run_dsp("generate community " + bad + " --nodes 0"), 2);
  EXPECT_EQ(run_dsp("generate community " + bad + " --nodes many"), 2);
  EXPECT_EQ(run_dsp("generate community " + bad + " --train-frac 1.5"), 2);
  EXPECT_EQ(run_dsp("generate rmat " + bad + " --a 0.7"), 2);
  EXPECT_EQ(run_dsp("generate rmat " + bad + " --features -1"), 2);
  EXPECT_EQ(run_dsp("generate"), 2);
  EXPECT_FALSE(fs::exists(bad));
  fs::remove_all(tmp);
}

// Every file of a directory, byte for byte equal to the other's.
void expect_same_files(const std::string& a, const std::string& b) {
  namespace fs = std::filesystem;
  int files = 0;
  for (const auto& e : fs::directory_iterator(a)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(iotest::slurp(e.path().string()) == iotest::slurp(b + "/" + name)) << name;
    ++files;
  }
  EXPECT_EQ(files, std::distance(fs::directory_iterator(b), fs::directory_iterator()));
}

TEST(GenerateCli, SplitFlags) {
  iotest::TempDir tmp("generate_splits");
  const std::string base = "generate community " + tmp.path() + "/";
  const std::string graph = " -n 3k -m 20k -k 8 -f 4 -s 3";
  auto run = [&](const std::string& out, const std::string& flags) {
    return iotest::run_cli(base + out + graph + flags, tmp);
  };
  // Without the flags, with the default preset, with the default fractions: the same files.
  ASSERT_EQ(run("none", "").exit_code, 0);
  ASSERT_EQ(run("all", " --splits all").exit_code, 0);
  ASSERT_EQ(run("fracs", " --train-frac 0.1 --valid-frac 0.05").exit_code, 0);
  expect_same_files(tmp / "none", tmp / "all");
  expect_same_files(tmp / "none", tmp / "fracs");

  ASSERT_EQ(run("test", " --test-frac 0.2").exit_code, 0);
  expect_split_sizes(load_dataset(tmp / "test"), 300, 150, 600);

  auto papers = iotest::run_cli(
      "generate rmat " + tmp / "papers" + " -n 1M -m 100k -f 0 -c 4 --splits papers100m", tmp);
  ASSERT_EQ(papers.exit_code, 0) << papers.err;
  EXPECT_NE(papers.out.find("train/valid/test 10870/1128/1930"), std::string::npos) << papers.out;
  expect_split_sizes(load_dataset(tmp / "papers"), 10870, 1128, 1930);

  // Refusals: exit 2, one line, nothing written.
  const std::pair<const char*, const char*> refused[] = {
      {" --splits papers100m --train-frac 0.2", "give --splits or --train-frac, not both"},
      {" --valid-frac 0.1 --splits all", "give --splits or --valid-frac, not both"},
      {" --splits papers100m --test-frac 0.5", "give --splits or --test-frac, not both"},
      {" --test-frac 0.9", "train + valid + test fractions (0.1 + 0.05 + 0.9) exceed 1"},
      {" --test-frac -0.5", "test fraction -0.5 is outside [0, 1]"},
      {" --splits papers",
       "unknown split preset 'papers' (all, papers100m); did you mean 'papers100m'?"},
  };
  for (const auto& [flags, message] : refused) {
    auto r = run("bad", flags);
    EXPECT_EQ(r.exit_code, 2) << flags;
    EXPECT_EQ(r.err, std::string("dsp: error: ") + message + "\n");
    EXPECT_FALSE(std::filesystem::exists(tmp / "bad"));
  }
}

}  // namespace
}  // namespace dsp
