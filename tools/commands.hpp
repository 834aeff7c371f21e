#pragma once
// Each subcommand of `dsp` registers itself on the root app; its callback runs the command and
// throws dsp::Error on failure (main maps InvalidArgument to exit 2, other errors to exit 1).
#include <CLI/CLI.hpp>

namespace dsp::cli {
void add_convert(CLI::App& app);
void add_generate(CLI::App& app);
void add_info(CLI::App& app);
void add_partition(CLI::App& app);
void add_bench(CLI::App& app);
void add_train(CLI::App& app);
}  // namespace dsp::cli
