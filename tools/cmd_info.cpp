#include "commands.hpp"
#include "core/error.hpp"

namespace dsp::cli {
void add_info(CLI::App& app) {
  auto* sub = app.add_subcommand("info", "(not implemented yet)");
  sub->callback([] { DSP_THROW("'dsp info' is not implemented yet"); });
}
}  // namespace dsp::cli
