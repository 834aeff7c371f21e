#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace dsp {
namespace fs = std::filesystem;

void write_file_atomic(const std::string& path, const std::string& content) {
  std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    DSP_CHECK_T(IoError, out.good(), "{}: cannot open for writing: {}", tmp, std::strerror(errno));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out.good()) {
      std::remove(tmp.c_str());
      DSP_THROW_T(IoError, "{}: write failed", tmp);
    }
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
