#pragma once
// Helpers shared by the dataset I/O tests: unique temp dirs, text/gzip writers, running the CLI.
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace dsp::iotest {

class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("dsp_io_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
                .string();
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline void write_text(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline void write_gz(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  gzFile f = gzopen(path.c_str(), "wb");
  if (!text.empty()) gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct CliResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs `dsp <args>` and captures its exit code, stdout and stderr.
inline CliResult run_cli(const std::string& args, const TempDir& scratch) {
  std::string out = scratch / "cli.out", err = scratch / "cli.err";
  std::string cmd = std::string(DSP_CLI_PATH) + " " + args + " >" + out + " 2>" + err;
  int rc = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

}  // namespace dsp::iotest
