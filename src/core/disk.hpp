#pragma once
// Disk space, refused before work: the commands that write large outputs (dsp generate out of
// core, dsp partition, dsp train's partition on the fly) estimate what they write and stop with
// one line when the file system that would hold it has less free, instead of failing hours later
// with ENOSPC and a partial output.
#include <cstdint>
#include <string>

namespace dsp {

// Bytes available to this user on the file system that holds `path`, or its nearest existing
// ancestor (the output need not exist yet); UINT64_MAX when it cannot be told.
uint64_t free_disk_bytes(const std::string& path);

// The nearest existing ancestor of `path` (itself if it exists), for messages.
std::string existing_ancestor(const std::string& path);

// Throws Error with the one-line refusal when `needed` > `available`:
//   "<what> needs about <needed> of disk in <dir> but <available> is free: <lower>"
void check_disk(const std::string& what, const std::string& path, uint64_t needed,
                uint64_t available, const std::string& lower);
// The same against free_disk_bytes(path).
void check_disk(const std::string& what, const std::string& path, uint64_t needed,
                const std::string& lower);

}  // namespace dsp
