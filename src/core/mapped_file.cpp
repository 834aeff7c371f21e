#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace dsp {
namespace fs = std::filesystem;

void remove_stale_temps(const std::string& path) {
  fs::path p(path);
  while (p.has_parent_path() && p.filename().empty()) p = p.parent_path();  // trailing slash
  const std::string base = p.filename().string();
  fs::path dir = p.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return;  // the directory does not exist yet: nothing to clean
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= base.size() + 5 || name.compare(0, base.size(), base) != 0) continue;
    std::string rest = name.substr(base.size());
    if (rest.compare(0, 5, ".tmp.") != 0 && rest.compare(0, 5, ".old.") != 0) continue;
    rest = rest.substr(5);
    if (rest.empty() || rest.size() > 9 ||
        !std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      continue;
    }
    const pid_t pid = static_cast<pid_t>(std::stol(rest));
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno == EPERM) continue;  // a live writer
    fs::remove_all(entry.path(), ec);
  }
}

void write_file_atomic(const std::string& path, const std::string& content) {
  remove_stale_temps(path);
  std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  // Created exclusively ("x": O_EXCL): never through a link or file someone placed under the name.
  // One of this pid's (a process before us that had our pid and died) goes first.
  std::remove(tmp.c_str());
  std::FILE* f = std::fopen(tmp.c_str(), "wbx");
  DSP_CHECK_T(IoError, f != nullptr, "{}: cannot open for writing: {}", tmp, std::strerror(errno));
  bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  ok = std::fflush(f) == 0 && ok;
  int err = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    DSP_THROW_T(IoError, "{}: write failed: {} (nothing was replaced)", path, std::strerror(err));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    DSP_THROW_T(IoError, "{}: cannot rename into place: {}", path, ec.message());
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DSP_CHECK_T(IoError, in.good(), "{}: cannot open: {}", path, std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool path_exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

void check_file_readable(const std::string& path, const char* missing) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int e = errno;
    DSP_CHECK_T(IoError, e != ENOENT && e != ENOTDIR, "{}: {}", path, missing);
    DSP_THROW_T(IoError, "{}: cannot access: {}", path, std::strerror(e));
  }
  DSP_CHECK_T(IoError, S_ISREG(st.st_mode), "{}: not a regular file", path);
  DSP_CHECK_T(IoError, ::access(path.c_str(), R_OK) == 0, "{}: cannot read: {}", path,
              std::strerror(errno));
}

bool path_within(const std::string& inner, const std::string& outer) {
  std::error_code ec;
  fs::path a = fs::weakly_canonical(fs::absolute(inner, ec), ec);
  fs::path b = fs::weakly_canonical(fs::absolute(outer, ec), ec);
  if (ec) return false;
  auto ia = a.begin(), ib = b.begin();
  for (; ib != b.end(); ++ia, ++ib) {
    if (ib->empty()) continue;  // a trailing separator
    if (ia == a.end() || *ia != *ib) return false;
  }
  return true;
}

uint64_t file_size(const std::string& path) {
  std::error_code ec;
  auto s = fs::file_size(path, ec);
  DSP_CHECK_T(IoError, !ec, "{}: {}", path, ec.message());
  return s;
}

StagedDir::StagedDir(std::string final_path, bool overwrite)
    : final_(std::move(final_path)), overwrite_(overwrite) {
  while (final_.size() > 1 && final_.back() == '/') final_.pop_back();
  std::error_code ec;
  if (fs::exists(final_, ec) && !overwrite_) {
    DSP_THROW_T(IoError, "{}: already exists (pass --overwrite to replace it)", final_);
  }
  fs::path parent = fs::path(final_).parent_path();
  if (!parent.empty()) {
    fs::create_directories(parent, ec);
    DSP_CHECK_T(IoError, !ec, "{}: cannot create parent directory: {}", parent.string(),
                ec.message());
  }
  remove_stale_temps(final_);
  tmp_ = fmt::format("{}.tmp.{}", final_, ::getpid());
  fs::remove_all(tmp_, ec);
  fs::create_directory(tmp_, ec);
  DSP_CHECK_T(IoError, !ec, "{}: cannot create directory: {}", tmp_, ec.message());
}

StagedDir::~StagedDir() {
  if (!committed_) {
    std::error_code ec;
    fs::remove_all(tmp_, ec);
  }
}

void StagedDir::commit() {
  std::error_code ec;
  if (fs::exists(final_, ec)) {
    DSP_CHECK_T(IoError, overwrite_, "{}: already exists", final_);
    // Move the old directory aside first so a valid directory is at final_ at every instant
    // except between two renames.
    std::string old = final_ + ".old." + std::to_string(::getpid());
    fs::rename(final_, old, ec);
    DSP_CHECK_T(IoError, !ec, "{}: cannot replace: {}", final_, ec.message());
    fs::rename(tmp_, final_, ec);
    DSP_CHECK_T(IoError, !ec, "{}: cannot rename into place: {}", final_, ec.message());
    fs::remove_all(old, ec);
  } else {
    fs::rename(tmp_, final_, ec);
    DSP_CHECK_T(IoError, !ec, "{}: cannot rename into place: {}", final_, ec.message());
  }
  committed_ = true;
}

void release_mapped_pages(const void* data, size_t bytes) {
  static const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  if (data == nullptr) return;
  const auto begin = reinterpret_cast<uintptr_t>(data);
  const uintptr_t lo = (begin + page - 1) / page * page, hi = (begin + bytes) / page * page;
  if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

MappedFile::MappedFile(const std::string& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  DSP_CHECK_T(IoError, fd >= 0, "{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    DSP_THROW_T(IoError, "{}: cannot stat: {}", path, std::strerror(e));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    // Shared and read-only: every rank of a machine maps the same page-cache pages, and a GPU can
    // register the range read-only (a private mapping would be copy-on-write to the driver).
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    int e = errno;
    ::close(fd);
    DSP_CHECK_T(IoError, p != MAP_FAILED, "{}: cannot map: {}", path, std::strerror(e));
    data_ = static_cast<unsigned char*>(p);
  } else {
    ::close(fd);
  }
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

void MappedFile::swap(MappedFile& o) noexcept {
  std::swap(path_, o.path_);
  std::swap(data_, o.data_);
  std::swap(size_, o.size_);
}

}  // namespace dsp
