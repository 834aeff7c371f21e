// Checkpoint rotation (checkpoint-<E>.pt, --keep-checkpoints, checkpoint.pt the newest) and
// --resume auto: the newest checkpoint that verifies, a damaged one skipped with one warning,
// none a new run, only damaged ones an error; a resumed run's --metrics file has each epoch once.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cora_dataset.hpp"
#include "core/error.hpp"
#include "core/fs.hpp"
#include "graph/dataset.hpp"
#include "graph/import.hpp"
#include "train/checkpoint_files.hpp"
#include "train/job.hpp"
#include "train/job_options.hpp"
#include "train/trainer.hpp"

namespace dsp {
namespace {
namespace fs = std::filesystem;

std::string temp_dir(const std::string& name) {
  auto p = fs::temp_directory_path() / fmt::format("dsp_resume_auto_{}_{}", name, ::getpid());
  fs::remove_all(p);
  return p.string();
}

// A few short epochs, a checkpoint after each, the newest 3 kept.
JobConfig small_job(const std::string& name) {
  JobConfig c;
  c.rank.path = cora_dir();
  c.rank.backend = "self";
  c.train.model.model = ModelKind::kSage;
  c.train.model.hidden = 16;
  c.train.num_threads = 1;
  c.sampler.fanouts = {5, 5};
  c.batch_size = 32;
  c.max_steps = 6;
  c.eval_max_nodes = 200;
  c.epochs = 4;
  c.seed = 5;
  c.progress = false;
  c.checkpoint_dir = temp_dir(name);
  c.checkpoint_every = 1;
  c.keep_checkpoints = 3;
  c.metrics_file = c.checkpoint_dir + ".metrics";
  return c;
}

std::vector<nlohmann::json> metrics_records(const std::string& f) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_file(f));
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void flip_byte_in_the_middle(const std::string& f) {
  std::string s = read_file(f);
  s[s.size() / 2] ^= 0x40;
  std::ofstream(f, std::ios::binary | std::ios::trunc) << s;  // in place: its hard links too
}

// What must match an uninterrupted run: the parameters (their checksums), and per epoch the
// loss, accuracies and learning rate.
void expect_same_run(const JobConfig& want, const JobConfig& got) {
  auto a = checkpoint_header(rotated_checkpoint(want.checkpoint_dir, want.epochs));
  auto b = checkpoint_header(rotated_checkpoint(got.checkpoint_dir, got.epochs));
  // The optimizer's archive keys its state by address: its bytes differ between any two trainers.
  a.at("checksums").erase("optimizer");
  b.at("checksums").erase("optimizer");
  EXPECT_EQ(a.at("checksums"), b.at("checksums"));
  EXPECT_EQ(a.at("step"), b.at("step"));
  const auto ma = metrics_records(want.metrics_file), mb = metrics_records(got.metrics_file);
  ASSERT_EQ(ma.size(), mb.size());
  for (size_t i = 0; i < ma.size(); ++i) {
    for (const char* k : {"epoch", "loss", "train_acc", "val_acc", "test_acc", "lr"}) {
      EXPECT_EQ(ma[i].at(k), mb[i].at(k)) << "record " << i << " " << k;
    }
  }
}

JobConfig reference() {
  static JobConfig c = [] {
    JobConfig r = small_job("reference");
    run_training(r);
    return r;
  }();
  return c;
}

TEST(ResumeAuto, RotationKeepsTheNewestCheckpointsAndLinksCheckpointPt) {
  JobConfig c = small_job("rotation");
  c.keep_checkpoints = 2;
  run_training(c);
  const std::vector<std::string> want = {"best.pt", "checkpoint-3.pt", "checkpoint-4.pt",
                                         "checkpoint.pt"};
  EXPECT_EQ(listing(c.checkpoint_dir), want);
  EXPECT_TRUE(
      fs::equivalent(c.checkpoint_dir + "/checkpoint.pt", c.checkpoint_dir + "/checkpoint-4.pt"));
  EXPECT_EQ(checkpoint_header(c.checkpoint_dir + "/checkpoint.pt").at("epoch"), 4);
  fs::remove_all(c.checkpoint_dir);
  fs::remove(c.metrics_file);
}

// The same command for the first start and every restart: no checkpoint starts the run (logged),
// a later start continues it, and the two equal one uninterrupted run.
TEST(ResumeAuto, NoCheckpointStartsTheRunAndALaterStartContinuesIt) {
  JobConfig c = small_job("fresh");
  c.resume = c.resume_auto = true;
  c.epochs = 2;
  EXPECT_EQ(run_training(resume_config(c, {"resume", "epochs"})).epochs_run, 2);
  c.epochs = 4;
  EXPECT_EQ(run_training(resume_config(c, {"resume", "epochs"})).epochs_run, 2);
  expect_same_run(reference(), c);
  fs::remove_all(c.checkpoint_dir);
  fs::remove(c.metrics_file);
}

// A damaged newest checkpoint (a flipped byte: a checksum fails; a truncated file: not a readable
// archive) is skipped with one warning naming it and why; the run continues from the one before,
// trains the lost epoch again (its metrics record once) and ends as an uninterrupted run.
void expect_damaged_newest_skipped(const std::string& name, void (*damage)(const std::string&),
                                   const std::string& why) {
  JobConfig c = small_job(name);
  c.epochs = 3;
  run_training(c);  // checkpoints 1, 2, 3 and three metrics records
  const std::string newest = rotated_checkpoint(c.checkpoint_dir, 3);
  damage(newest);
  c.epochs = 4;
  c.resume = c.resume_auto = true;
  testing::internal::CaptureStderr();
  const JobResult r = run_training(resume_config(c, {"resume", "epochs"}));
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.epochs_run, 2);  // epochs 3 and 4, from checkpoint-2.pt
  const std::string warning =
      "--resume auto: skipping an incomplete or damaged checkpoint: " + newest;
  size_t lines = 0;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.find(warning) != std::string::npos) {
      ++lines;
      EXPECT_NE(line.find(why), std::string::npos) << line;
    }
  }
  EXPECT_EQ(lines, 1u) << log;
  expect_same_run(reference(), c);
  verify_checkpoint(newest);  // written again by the resumed run
  fs::remove_all(c.checkpoint_dir);
  fs::remove(c.metrics_file);
}

TEST(ResumeAuto, FlippedByteInTheNewestIsSkipped) {
  expect_damaged_newest_skipped("flipped", flip_byte_in_the_middle, "fails its checksum");
}

TEST(ResumeAuto, TruncatedNewestIsSkipped) {
  expect_damaged_newest_skipped(
      "truncated", [](const std::string& f) { fs::resize_file(f, fs::file_size(f) / 2); },
      "is not a dsp checkpoint");
}

// With learnt embeddings each rank's shard is part of the checkpoint: a checkpoint whose shard a
// killed rank never wrote is skipped (the warning names the shard), and the run continues from the
// one before with the embeddings' rows and optimizer state of that epoch.
TEST(ResumeAuto, CheckpointWithoutItsEmbeddingShardIsSkipped) {
  JobConfig whole = small_job("emb_whole");
  whole.embedding.dim = 8;
  run_training(whole);
  JobConfig c = small_job("emb_shard");
  c.embedding.dim = 8;
  c.epochs = 3;
  run_training(c);
  const std::string shard = rotated_checkpoint(c.checkpoint_dir, 3) + ".embedding.0-of-1";
  ASSERT_TRUE(fs::exists(shard));
  fs::remove(shard);
  c.epochs = 4;
  c.resume = c.resume_auto = true;
  testing::internal::CaptureStderr();
  const JobResult r = run_training(resume_config(c, {"resume", "epochs"}));
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(r.epochs_run, 2);
  EXPECT_NE(log.find("--resume auto: skipping an incomplete or damaged checkpoint: " + shard),
            std::string::npos)
      << log;
  expect_same_run(whole, c);
  EXPECT_TRUE(fs::exists(shard));
  for (const JobConfig& j : {whole, c}) {
    fs::remove_all(j.checkpoint_dir);
    fs::remove(j.metrics_file);
  }
}

// Only damaged checkpoints: an error, not a new run over them (which would replace the run's
// checkpoints and metrics). Plain --resume stays strict: a damaged checkpoint.pt is an error.
TEST(ResumeAuto, OnlyDamagedCheckpointsAreAnErrorAndPlainResumeIsStrict) {
  JobConfig c = small_job("all_damaged");
  c.epochs = 2;
  c.keep_checkpoints = 2;
  run_training(c);
  for (int e : {1, 2}) flip_byte_in_the_middle(rotated_checkpoint(c.checkpoint_dir, e));
  c.epochs = 3;
  c.resume = c.resume_auto = true;
  try {
    run_training(c);
    ADD_FAILURE() << "no error";
  } catch (const FormatError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--resume auto: none of the 2 checkpoint(s) in " + c.checkpoint_dir +
                  " verifies (each named above); remove them to start a new run there");
  }
  c.resume_auto = false;  // checkpoint.pt is checkpoint-2.pt: damaged too
  try {
    run_training(c);
    ADD_FAILURE() << "no error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find(c.checkpoint_dir + "/checkpoint.pt"), std::string::npos)
        << e.what();
  }
  fs::remove_all(c.checkpoint_dir);
  fs::remove(c.metrics_file);
}

// --resume alone is the strict resume, --resume auto the tolerant one; anything else is refused.
// In a --config file: true, false or "auto".
TEST(ResumeAuto, OptionSpellings) {
  const JobOption& o = options::find(job_options(), "resume");
  EXPECT_TRUE(o.takes_value && o.value_optional);
  JobConfig c;
  o.parse(c, "");
  EXPECT_TRUE(c.resume && !c.resume_auto);
  o.parse(c, "auto");
  EXPECT_TRUE(c.resume && c.resume_auto);
  EXPECT_EQ(o.write(c), "auto");
  try {
    o.parse(c, "/some/path");
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "--resume takes no value or auto, got '/some/path'");
  }
  o.read(c, false);
  EXPECT_TRUE(!c.resume && !c.resume_auto);
  EXPECT_EQ(o.write(c), false);
  o.read(c, "auto");
  EXPECT_TRUE(c.resume && c.resume_auto);
  EXPECT_THROW(o.read(c, "yes"), InvalidArgument);
  JobConfig k = small_job("keep0");
  k.keep_checkpoints = 0;
  try {
    k.validate();
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_STREQ(e.what(), "--keep-checkpoints must be >= 1, got 0");
  }
}

TEST(ResumeAuto, MetricsFileIsCutToTheCheckpointsEpochs) {
  const std::string f = temp_dir("metrics.jsonl");
  write_file_atomic(f,
                    "{\"epoch\":1,\"loss\":1}\n{\"epoch\":2,\"loss\":2}\n{\"epoch\":3,\"loss\":3}\n"
                    "{\"epoch\":4,\"lo");
  truncate_metrics(f, 2);
  EXPECT_EQ(read_file(f), "{\"epoch\":1,\"loss\":1}\n{\"epoch\":2,\"loss\":2}\n");
  truncate_metrics(f, 0);
  EXPECT_EQ(read_file(f), "");
  fs::remove(f);
  truncate_metrics(f, 3);  // no file: nothing
  EXPECT_FALSE(fs::exists(f));
}

TEST(ResumeAuto, PruningRemovesNewerAndOlderFilesOnly) {
  const std::string d = temp_dir("prune");
  fs::create_directories(d);
  for (const char* n : {"checkpoint-1.pt", "checkpoint-2.pt", "checkpoint-3.pt", "checkpoint-9.pt",
                        "checkpoint-2.pt.embedding.0-of-2", "checkpoint-x.pt", "best.pt"}) {
    write_file_atomic(d + "/" + n, "x");
  }
  EXPECT_EQ(rotated_epochs(d), (std::vector<int64_t>{9, 3, 2, 1}));
  EXPECT_EQ(rotated_epochs(d, ".embedding.0-of-2"), (std::vector<int64_t>{2}));
  prune_checkpoints(d, "", 3, 2);  // 9 belongs to another run; 1 is past the newest 2
  const std::vector<std::string> want = {"best.pt", "checkpoint-2.pt",
                                         "checkpoint-2.pt.embedding.0-of-2", "checkpoint-3.pt",
                                         "checkpoint-x.pt"};
  EXPECT_EQ(listing(d), want);
  fs::remove_all(d);
}

}  // namespace
}  // namespace dsp
