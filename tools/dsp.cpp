// `dsp`: the one command-line tool. Exit codes: 0 ok, 2 usage error, 1 runtime error.
#include <cstdio>

#include "ccc/job.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"

namespace {

// One line naming the fault. On a rank of a multi-rank job the error also ends every other rank
// at once: returning would run MPI_Finalize at exit, which waits for peers that may be blocked in
// a collective this rank will never join.
int fail(const char* what, int code) {
  if (dsp::job_has_peers()) {
    dsp::abort_job(fmt::format("error on rank {}: {}", dsp::job_rank(), what), code);
  }
  std::fprintf(stderr, "dsp: error: %s\n", what);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
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
    return fail(e.what(), 2);
  } catch (const dsp::Error& e) {
    DSP_DEBUG("cli", "raised at {}:{}", e.file(), e.line());
    return fail(e.what(), 1);
  } catch (const std::exception& e) {
    return fail(e.what(), 1);
  }
  return 0;
}
