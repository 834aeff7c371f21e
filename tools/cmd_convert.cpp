#include "commands.hpp"
#include "core/error.hpp"

namespace dsp::cli {
void add_convert(CLI::App& app) {
  auto* sub = app.add_subcommand("convert", "(not implemented yet)");
  sub->callback([] { DSP_THROW("'dsp convert' is not implemented yet"); });
}
}  // namespace dsp::cli
