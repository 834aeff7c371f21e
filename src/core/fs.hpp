#pragma once
// File-system helpers: atomic writes (temp name + rename, so a crash never leaves a file or a
// directory that looks valid) and read-only memory mappings.
#include <cstddef>
#include <cstdint>
#include <string>

namespace dsp {

// Writes `content` to `path.tmp.<pid>` and renames it onto `path`. IoError naming `path` and the
// system's reason (e.g. "No space left on device") when it cannot; `path` is then unchanged.
void write_file_atomic(const std::string& path, const std::string& content);
// Removes `<path>.tmp.<pid>` and `<path>.old.<pid>` (files or directories) left by writers of
// `path` that died: no process <pid> exists on this machine. Every writer of an output calls it
// first, so an interrupted write is cleaned up by the next write of the same output. A concurrent
// writer of the same output (a live pid) keeps its files.
void remove_stale_temps(const std::string& path);
std::string read_file(const std::string& path);  // IoError naming the path on failure
bool path_exists(const std::string& path);
// IoError unless `path` is a regular file this process can read: "<path>: <missing>" when it
// does not exist, "<path>: cannot access: <reason>" / "cannot read: <reason>" otherwise (a
// permission error is not a missing file).
void check_file_readable(const std::string& path, const char* missing = "missing file");
// True when `inner` is `outer` or lies inside it, after resolving ".", ".." and symbolic links
// (parts that do not exist yet compare lexically). Replacing `outer` would destroy `inner`.
bool path_within(const std::string& inner, const std::string& outer);
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

// Drops this process's page-table entries for the whole pages inside [data, data + bytes) of a
// read-only file mapping such as MappedFile's (madvise MADV_DONTNEED; the partial pages at either
// end are kept), so that they stop counting in its resident set. The pages stay in the page cache
// (or on disk) and a later read maps them again: nothing is lost. For a process that reads a large
// mapped file once (the partitioner), what it holds mapped then stays bounded by what it reads
// between releases. Only for PROT_READ file mappings: on anonymous or private memory DONTNEED
// discards the contents (reads return zeros), so callers check (Array::release_pages: mapped
// views only). Advisory: a failure is ignored.
void release_mapped_pages(const void* data, size_t bytes);

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
