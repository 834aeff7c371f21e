// Least privilege for what dsp creates in shared places: the FIFO cache's shared-memory level is
// created exclusively and owner-only (0600), is gone once its creator goes, and an object of the
// same name that is not this user's owner-only one is refused, never attached (another user who
// made it first could read or rewrite the rows). The temporary files of atomic writes are created
// exclusively: a link placed under the temporary name is never written through. RemoveAtExit
// removes its path once the process that made it is gone, even killed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <string>
#include <thread>

#include "core/error.hpp"
#include "core/fs.hpp"
#include "core/remove_at_exit.hpp"
#include "error_of.hpp"
#include "graph/npy.hpp"
#include "layout/store/fifo_cache.hpp"

namespace dsp {
namespace {

// The object behind a POSIX shared-memory name (Linux keeps them in /dev/shm).
std::string shm_path(const std::string& name) { return "/dev/shm" + name; }

TEST(LeastPrivilege, SharedFifoLevelIsOwnerOnlyAndRemovedByItsCreator) {
  const std::string name = "/dsp_lp_mode_" + std::to_string(::getpid());
  {
    FifoRowCache c(8, 100, 16, name);
    struct stat st {};
    ASSERT_EQ(::stat(shm_path(name).c_str(), &st), 0) << shm_path(name);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(st.st_uid, ::geteuid());
    // A second process of the job attaches to it (same user, owner-only).
    FifoRowCache other(8, 100, 16, name);
    EXPECT_TRUE(other.shared());
  }
  struct stat st {};
  EXPECT_NE(::stat(shm_path(name).c_str(), &st), 0) << "left behind: " << shm_path(name);
}

TEST(LeastPrivilege, ObjectOthersCanOpenIsRefused) {
  const std::string name = "/dsp_lp_open_" + std::to_string(::getpid());
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::fchmod(fd, 0644), 0);  // as if someone had made it readable by all
  ::close(fd);
  const std::string err = test::error_of<IoError>([&] { FifoRowCache c(8, 100, 16, name); });
  ::shm_unlink(name.c_str());
  EXPECT_EQ(err,
            "fifo cache: " + name + " exists but is not this user's owner-only object (owner uid " +
                std::to_string(::geteuid()) + ", mode 644); refusing to share rows through it");
}

// A fresh directory under the test's temporary directory.
std::string fresh_dir(const std::string& name) {
  const std::string d = ::testing::TempDir() + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

TEST(LeastPrivilege, AtomicWritesNeverWriteThroughALinkAtTheirTemporaryName) {
  const std::string d = fresh_dir("dsp_lp_link");
  const std::string victim = d + "/victim", pid = std::to_string(::getpid());
  write_file_atomic(victim, "untouched");
  std::filesystem::create_symlink(victim, d + "/out.json.tmp." + pid);
  write_file_atomic(d + "/out.json", "{}");
  std::filesystem::create_symlink(victim, d + "/out.npy.tmp." + pid);
  NpyWriter w(d + "/out.npy", DType::kInt64, {1});
  const int64_t one = 1;
  w.write(&one, sizeof(one));
  w.close();
  EXPECT_EQ(read_file(victim), "untouched");
  EXPECT_EQ(read_file(d + "/out.json"), "{}");
  EXPECT_FALSE(std::filesystem::is_symlink(d + "/out.json"));
  EXPECT_FALSE(std::filesystem::is_symlink(d + "/out.npy"));
  EXPECT_EQ(load_npy(d + "/out.npy").data<int64_t>()[0], 1);
  std::filesystem::remove_all(d);
}

TEST(LeastPrivilege, RemoveAtExitRemovesItsPathWhenTheProcessIsKilled) {
  const std::string d = fresh_dir("dsp_lp_exit");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    RemoveAtExit r(d);
    ::kill(::getpid(), SIGKILL);  // no destructor runs
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  for (int i = 0; i < 200 && std::filesystem::exists(d); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(std::filesystem::exists(d));
  // And at once when it goes out of scope.
  const std::string e = fresh_dir("dsp_lp_scope");
  { RemoveAtExit r(e); }
  EXPECT_FALSE(std::filesystem::exists(e));
}

}  // namespace
}  // namespace dsp
