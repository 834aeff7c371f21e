#pragma once
// Memory planning: commands that can outgrow the machine estimate their peak before they start
// and refuse with one line (needed, budget, available, and the option that lowers the need)
// instead of being killed by the OOM killer hours in.
#include <cstdint>
#include <string>

namespace dsp {

// Parses a byte count such as "512M", "12G", "1.5GiB", "64k" or "1000000" (suffixes are powers of
// 1024; an optional trailing "B" or "iB"). InvalidArgument naming `flag` on anything else.
uint64_t parse_bytes(const std::string& flag, const std::string& text);
// "1.50 GiB", "12.0 MiB", "512 B".
std::string format_bytes(uint64_t bytes);

// The default budget: 3/4 of the memory available now (MemAvailable, and the cgroup's limit when
// lower), leaving room for the page cache that out-of-core passes stream through.
uint64_t default_memory_budget();
// Memory available now (MemAvailable, capped by the cgroup limit); 0 if unknown.
uint64_t available_memory();

// Resident memory of this process now (its binary and libraries included: LibTorch alone maps
// over 100 MiB), which every plan starts from.
uint64_t process_rss_bytes();
// What a budget leaves for a command's own allocations: budget - process_rss_bytes(), or 0.
uint64_t memory_left(uint64_t budget);

// Throws Error with the one-line refusal when process_rss_bytes() + needed > budget (the line
// shows that sum as what is needed):
//   "<what> needs about <needed> of memory but the budget is <budget> (<available> available):
//    <lower>"
// `lower` names the options that reduce the need, e.g. "lower --nodes or raise --memory-budget".
void check_memory(const std::string& what, uint64_t needed, uint64_t budget,
                  const std::string& lower);

}  // namespace dsp
