// `dsp`: the one command-line tool. Exit codes: 0 ok, 2 usage error, 1 runtime error.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ccc/job.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "core/logging.hpp"
#ifdef DSP_HAVE_PIPELINE
#include "pipeline/cores.hpp"
#endif

namespace {
// "dsp: error: <message>". With DSP_ERROR_TYPE=1 in the environment (the Python package sets it
// when it runs `dsp train` as a child process) the line names the error's class,
// "dsp: error (IoError): <message>", so that the caller can raise the matching dsp.IoError.
const char* error_class(const std::exception& e) {
  if (dynamic_cast<const dsp::InvalidArgument*>(&e)) return "InvalidArgument";
  if (dynamic_cast<const dsp::IoError*>(&e)) return "IoError";
  if (dynamic_cast<const dsp::FormatError*>(&e)) return "FormatError";
  if (dynamic_cast<const dsp::CommError*>(&e)) return "CommError";
  if (dynamic_cast<const dsp::NotSupported*>(&e)) return "NotSupported";
  return "Error";
}

// One line naming the fault. On a rank of a multi-rank job the error also ends every other rank
// at once: returning would run MPI_Finalize at exit, which waits for peers that may be blocked in
// a collective this rank will never join.
int report(const std::exception& e, int code) {
  const char* typed = std::getenv("DSP_ERROR_TYPE");
  const std::string cls =
      typed && std::strcmp(typed, "1") == 0 ? fmt::format(" ({})", error_class(e)) : "";
  if (dsp::job_has_peers()) {
    dsp::abort_job(fmt::format("error{} on rank {}: {}", cls, dsp::job_rank(), e.what()), code);
  }
  std::fprintf(stderr, "dsp: error%s: %s\n", cls.c_str(), e.what());
  return code;
}
}  // namespace

int main(int argc, char** argv) {
#ifdef DSP_HAVE_PIPELINE
  dsp::ensure_passive_waits(argv);  // thread pools that wait must not burn the stages' cores
#endif
  CLI::App app{"dsp: distributed sampling and pipelining for GNN training", "dsp"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "dsp " DSP_VERSION);
  std::string level;
  app.add_option("--log-level", level, "trace|debug|info|warn|error|off (or DSP_LOG_LEVEL)")
      ->each([](const std::string& s) { dsp::set_log_level(dsp::parse_log_level(s)); });
  // Subcommands made after this hand options they do not know to the root: --log-level is
  // accepted after the subcommand too (`dsp train D --log-level debug`).
  app.fallthrough();
  dsp::cli::add_convert(app);
  dsp::cli::add_generate(app);
  dsp::cli::add_info(app);
  dsp::cli::add_partition(app);
  dsp::cli::add_bench(app);
#ifdef DSP_HAVE_TRAIN
  dsp::cli::add_train(app);
  dsp::cli::add_predict(app);
#endif
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const dsp::InvalidArgument& e) {
    return report(e, 2);
  } catch (const dsp::Error& e) {
    int code = report(e, 1);
    DSP_DEBUG("cli", "raised at {}:{}", e.file(), e.line());
    return code;
  } catch (const std::exception& e) {
    return report(e, 1);
  }
  return 0;
}
