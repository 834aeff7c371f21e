// `dsp`: the one command-line tool. Exit codes: 0 ok, 2 usage error, 1 runtime error.
#include <cstdio>

#include "commands.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"
#ifdef DSP_HAVE_PIPELINE
#include "pipeline/cores.hpp"
#endif

int main(int argc, char** argv) {
#ifdef DSP_HAVE_PIPELINE
  dsp::ensure_passive_waits(argv);  // thread pools that wait must not burn the stages' cores
#endif
  CLI::App app{"dsp: distributed sampling and pipelining for GNN training", "dsp"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "dsp 0.1.0");
  std::string level;
  app.add_option("--log-level", level, "trace|debug|info|warn|error|off (or DSP_LOG_LEVEL)")
      ->each([](const std::string& s) { dsp::set_log_level(dsp::parse_log_level(s)); });
  dsp::cli::add_convert(app);
  dsp::cli::add_generate(app);
  dsp::cli::add_info(app);
  dsp::cli::add_partition(app);
  dsp::cli::add_bench(app);
#ifdef DSP_HAVE_TRAIN
  dsp::cli::add_train(app);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const dsp::InvalidArgument& e) {
    std::fprintf(stderr, "dsp: error: %s\n", e.what());
    return 2;
  } catch (const dsp::Error& e) {
    std::fprintf(stderr, "dsp: error: %s\n", e.what());
    DSP_DEBUG("cli", "raised at {}:{}", e.file(), e.line());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dsp: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
