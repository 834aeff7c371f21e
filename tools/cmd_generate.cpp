#include "commands.hpp"
#include "core/error.hpp"

namespace dsp::cli {
void add_generate(CLI::App& app) {
  auto* sub = app.add_subcommand("generate", "(not implemented yet)");
  sub->callback([] { DSP_THROW("'dsp generate' is not implemented yet"); });
}
}  // namespace dsp::cli
