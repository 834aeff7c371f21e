#include "train/checkpoint_files.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.hpp"
#include "core/fs.hpp"

namespace dsp {
namespace fs = std::filesystem;

std::string rotated_checkpoint(const std::string& dir, int64_t epochs) {
  return fmt::format("{}/checkpoint-{}.pt", dir, epochs);
}

std::vector<int64_t> rotated_epochs(const std::string& dir, const std::string& suffix) {
  static const std::string head = "checkpoint-", tail = ".pt";
  std::vector<int64_t> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const size_t digits =
        name.size() - std::min(name.size(), head.size() + tail.size() + suffix.size());
    if (digits == 0 || digits > 9 || name.compare(0, head.size(), head) != 0 ||
        name.compare(head.size() + digits, std::string::npos, tail + suffix) != 0) {
      continue;
    }
    const std::string number = name.substr(head.size(), digits);
    if (std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      out.push_back(std::stoll(number));
    }
  }
  std::sort(out.rbegin(), out.rend());
  return out;
}

void link_file_atomic(const std::string& from, const std::string& to) {
  remove_stale_temps(to);
  const std::string tmp = fmt::format("{}.tmp.{}", to, ::getpid());
  std::error_code ec;
  fs::remove(tmp, ec);
  ec.clear();
  fs::create_hard_link(from, tmp, ec);
  if (ec) {
    ec.clear();
    fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
  }
  if (!ec) fs::rename(tmp, to, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    DSP_THROW_T(IoError, "{}: cannot make it {}: {}", to, from, ec.message());
  }
}

void prune_checkpoints(const std::string& dir, const std::string& suffix, int64_t epochs,
                       int keep) {
  int kept = 0;
  for (const int64_t e : rotated_epochs(dir, suffix)) {
    if (e <= epochs && kept++ < keep) continue;
    std::error_code ec;  // a file that cannot be removed is only left behind
    fs::remove(rotated_checkpoint(dir, e) + suffix, ec);
  }
}

void truncate_metrics(const std::string& path, int64_t epochs) {
  if (!path_exists(path)) return;
  std::istringstream in(read_file(path));
  std::string line, out;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline: a record torn by a kill
    const nlohmann::json rec = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (rec.is_object() && rec.value("epoch", int64_t{0}) >= 1 &&
        rec.value("epoch", int64_t{0}) <= epochs) {
      out += line + "\n";
    }
  }
  write_file_atomic(path, out);
}

}  // namespace dsp

namespace dsp {

std::vector<std::string> earlier_run_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const bool ours = name.rfind("checkpoint", 0) == 0 || name.rfind("best.pt", 0) == 0;
    if (ours && name.find(".pt") != std::string::npos) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void claim_checkpoint_dir(const std::string& dir, bool overwrite) {
  const std::vector<std::string> files = earlier_run_files(dir);
  if (files.empty()) return;
  if (!overwrite) {
    const size_t shown = std::min<size_t>(files.size(), 4);
    std::string list;
    for (size_t i = 0; i < shown; ++i) list += (i ? ", " : "") + files[i];
    if (files.size() > shown) list += fmt::format(" and {} more", files.size() - shown);
    DSP_THROW_T(
        InvalidArgument,
        "--checkpoint-dir {} holds an earlier run ({}): continue it with --resume, or replace it "
        "with --overwrite",
        dir, list);
  }
  for (const std::string& f : files) {
    std::error_code ec;  // another rank may have removed it first
    fs::remove(fs::path(dir) / f, ec);
  }
}

std::string interrupt_note(int64_t done, int64_t epochs, const std::string& dir, int64_t saved,
                           bool overwrite) {
  const std::string where = done == 0 ? fmt::format(" before epoch 1 of {} ended", epochs)
                                      : fmt::format(" after epoch {} of {}", done, epochs);
  if (dir.empty()) {
    return where +
           "; nothing was saved (--checkpoint-dir DIR --checkpoint-every 1 keeps a checkpoint a "
           "run continues from with --resume auto)";
  }
  if (saved == 0) {
    return where + fmt::format("; no checkpoint in {} yet (--checkpoint-every 1 writes one an epoch)",
                               dir);
  }
  return where + fmt::format(
                     "; continue from the checkpoint of epoch {} ({}) with the same command and "
                     "--resume auto{}",
                     saved, rotated_checkpoint(dir, saved), overwrite ? " in place of --overwrite" : "");
}

}  // namespace dsp
