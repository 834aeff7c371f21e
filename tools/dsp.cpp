// `dsp`: the one command-line tool. Exit codes: 0 ok, 2 usage error, 1 runtime error.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "ccc/job.hpp"
#include "commands.hpp"
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "core/logging.hpp"
#include "usage.hpp"
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

// " (IoError)" for the error line when DSP_ERROR_TYPE=1, else "".
std::string class_tag(const char* cls) {
  const char* typed = std::getenv("DSP_ERROR_TYPE");
  return typed && std::strcmp(typed, "1") == 0 ? fmt::format(" ({})", cls) : "";
}

// One line naming the fault. On a rank of a multi-rank job the error also ends every other rank
// at once: returning would run MPI_Finalize at exit, which waits for peers that may be blocked in
// a collective this rank will never join.
int report(const std::string& message, const char* cls, int code) {
  if (dsp::job_has_peers()) {
    dsp::abort_job(fmt::format("error{} on rank {}: {}", class_tag(cls), dsp::job_rank(), message),
                   code);
  }
  std::fprintf(stderr, "dsp: error%s: %s\n", class_tag(cls).c_str(), message.c_str());
  return code;
}

int report(const std::exception& e, int code) { return report(e.what(), error_class(e), code); }

// A usage error (exit 2) found before this process joined a job's communicator comes from the
// command line (and its --config file) alone, which every rank shares, so every rank of the job
// finds it: rank 0 prints it and every rank exits 2, without MPI_Abort. The other ranks first give
// rank 0 a moment to print, since a launcher ends the job at the first non-zero exit.
int usage_error(const std::string& message, const char* cls) {
  if (!dsp::job_has_peers() && dsp::cli::launcher_rank() != 0) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    return 2;
  }
  return report(message, cls, 2);
}
}  // namespace

int main(int argc, char** argv) {
#ifdef DSP_HAVE_PIPELINE
  dsp::ensure_passive_waits(argv);  // thread pools that wait must not burn the stages' cores
#endif
  // Ctrl-C or SIGTERM: one line and exit 130/143. A rank of a multi-rank job exits quietly until
  // the job's communicator exists (a launcher also ends the others so when one rank fails), then
  // ccc's MPI runtime tells an interrupt from a failure.
  dsp::install_interrupt_handlers(dsp::cli::launcher_size() > 1);
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
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    return usage_error(dsp::cli::parse_error_message(app, e), "InvalidArgument");
  } catch (const dsp::InvalidArgument& e) {
    return usage_error(dsp::cli::with_choice_hint(e.what()), error_class(e));
  } catch (const dsp::Error& e) {
    int code = report(e, 1);
    DSP_DEBUG("cli", "raised at {}:{}", e.file(), e.line());
    return code;
  } catch (const std::exception& e) {
    return report(e, 1);
  }
  return 0;
}
