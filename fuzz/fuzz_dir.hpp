#pragma once
// A directory packed into one fuzz input, for the targets that fuzz the reader of a whole
// directory (a dataset's dataset.json and .npy arrays, a partition's files). The input is a list of
// entries
//   NAME '\n' LENGTH (4 bytes, little-endian) DATA (LENGTH bytes, fewer when the input ends first)
// where NAME is a relative path of [A-Za-z0-9_.-] components joined by '/' ("." and ".." refused).
// fuzz/pack_dir.py packs a directory this way (the seed corpora are real directories written by
// dsp generate and dsp partition, so the mutations start past the readers' first checks).
//
// FuzzDir unpacks an input into a private directory (mkdtemp: mode 0700) under $TMPDIR, emptied
// before each input and removed when the process exits normally.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

namespace dsp_fuzz {

class FuzzDir {
 public:
  FuzzDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/dsp-fuzz-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr) {
      std::perror("fuzz: mkdtemp");
      std::abort();
    }
    root_ = buf.data();
  }
  ~FuzzDir() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  FuzzDir(const FuzzDir&) = delete;
  FuzzDir& operator=(const FuzzDir&) = delete;

  const std::string& path() const { return root_; }

  // Empties the directory and writes the input's files into it. False when the input holds no
  // usable entry (nothing to read then).
  bool unpack(const uint8_t* data, size_t size) {
    clear();
    size_t pos = 0, files = 0;
    while (pos < size && files < kMaxFiles) {
      size_t nl = pos;
      while (nl < size && nl - pos <= kMaxName && data[nl] != '\n') ++nl;
      if (nl >= size || data[nl] != '\n') break;
      const std::string name(reinterpret_cast<const char*>(data + pos), nl - pos);
      pos = nl + 1;
      if (pos + 4 > size) break;
      const size_t len = static_cast<size_t>(data[pos]) | static_cast<size_t>(data[pos + 1]) << 8 |
                         static_cast<size_t>(data[pos + 2]) << 16 |
                         static_cast<size_t>(data[pos + 3]) << 24;
      pos += 4;
      const size_t n = std::min(len, size - pos);
      if (valid_name(name) && write(name, data + pos, n)) ++files;
      pos += n;
    }
    return files > 0;
  }

 private:
  static constexpr size_t kMaxName = 200, kMaxFiles = 64;

  static bool valid_name(const std::string& name) {
    if (name.empty() || name.front() == '/' || name.back() == '/') return false;
    size_t start = 0;
    while (start <= name.size()) {
      size_t end = name.find('/', start);
      if (end == std::string::npos) end = name.size();
      const std::string part = name.substr(start, end - start);
      if (part.empty() || part == "." || part == "..") return false;
      for (char c : part) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
        if (!ok) return false;
      }
      start = end + 1;
    }
    return true;
  }

  // False when the name collides with a directory or a file already written (e.g. "a" then "a/b").
  bool write(const std::string& name, const uint8_t* data, size_t n) {
    namespace fs = std::filesystem;
    const fs::path p = fs::path(root_) / name;
    std::error_code ec;
    fs::create_directories(p.parent_path(), ec);
    if (ec) return false;
    std::FILE* f = std::fopen(p.c_str(), "wb");
    if (f == nullptr) return false;
    const bool ok = std::fwrite(data, 1, n, f) == n;
    return std::fclose(f) == 0 && ok;
  }

  void clear() {
    namespace fs = std::filesystem;
    std::error_code ec;
    std::vector<fs::path> entries;
    for (const auto& e : fs::directory_iterator(root_, ec)) entries.push_back(e.path());
    for (const auto& p : entries) fs::remove_all(p, ec);
  }

  std::string root_;
};

// Reports why an input was refused when DSP_FUZZ_VERBOSE is set (to check that the seeds are
// accepted: DSP_FUZZ_VERBOSE=1 build-fuzz/fuzz/fuzz_<target> fuzz/corpus/<target>/*).
inline void note_refused(const std::exception& e) {
  if (std::getenv("DSP_FUZZ_VERBOSE") != nullptr) std::fprintf(stderr, "refused: %s\n", e.what());
}

}  // namespace dsp_fuzz
