#pragma once
// Each subcommand of `dsp` registers itself on the root app; its callback runs the command and
// throws dsp::Error on failure (main maps InvalidArgument to exit 2, other errors to exit 1).
#include <CLI/CLI.hpp>

namespace dsp::cli {

// For unsigned options (seeds): CLI11 would wrap "-1" into 2^64 - 1 and run with that.
inline CLI::Validator non_negative_integer() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) return "";
        return "must be a non-negative integer, got '" + s + "'";
      },
      "");
}

void add_convert(CLI::App& app);
void add_generate(CLI::App& app);
void add_info(CLI::App& app);
void add_partition(CLI::App& app);
void add_bench(CLI::App& app);
void add_train(CLI::App& app);
}  // namespace dsp::cli
