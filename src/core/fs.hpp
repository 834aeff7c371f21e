#pragma once
// File-system helpers: atomic writes (temp name + rename, so a crash never leaves a file or a
// directory that looks valid) and read-only memory mappings.
#include <cstddef>
#include <cstdint>
#include <string>

namespace dsp {

// Writes `content` to `path.tmp.<pid>` and renames it onto `path`.
void write_file_atomic(const std::string& path, const std::string& content);
std::string read_file(const std::string& path);  // IoError naming the path on failure
bool path_exists(const std::string& path);
uint64_t file_size(const std::string& path);

// A directory written under a temporary sibling name and renamed into place by commit().
// If destroyed without commit() (an exception, a crash), the temporary directory is removed and
// nothing appears at `final_path`. An existing final_path is replaced only when `overwrite`.
class StagedDir {
 public:
  StagedDir(std::string final_path, bool overwrite);
  ~StagedDir();
  StagedDir(const StagedDir&) = delete;
  StagedDir& operator=(const StagedDir&) = delete;
  // Path of a file inside the staging directory.
  std::string file(const std::string& name) const { return tmp_ + "/" + name; }
  const std::string& tmp_path() const { return tmp_; }
  void commit();

 private:
  std::string final_, tmp_;
  bool overwrite_, committed_ = false;
};

// A read-only, shared memory mapping of a whole file. Empty files map to data() == nullptr.
class MappedFile {
 public:
  MappedFile() = default;
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(MappedFile&& o) noexcept { swap(o); }
  MappedFile& operator=(MappedFile&& o) noexcept {
    swap(o);
    return *this;
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void swap(MappedFile& o) noexcept;
  std::string path_;
  unsigned char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace dsp
