#pragma once
// The job's progress on rank 0's console: the training epoch's bar and an evaluation's status,
// both as the console's status line on a terminal (core/console.hpp), never splicing into log
// lines.
#include <unistd.h>

#include <fmt/format.h>

#include <functional>
#include <string>

#include "core/console.hpp"
#include "core/logging.hpp"
#include "core/timer.hpp"

namespace dsp {

// "  epoch 3/10 [=====>      ] 45/100  ETA 5s  loss 0.512" as the console's status line on a
// terminal (log lines never splice into it), nothing otherwise.
class ProgressBar {
 public:
  ProgressBar(bool on, int epoch, int epochs, int64_t steps)
      : on_(on && ::isatty(2)), epoch_(epoch), epochs_(epochs), steps_(steps) {}
  // `loss` is called only when the line is drawn (it reads the trainer's device).
  void update(int64_t done, const std::function<double()>& loss) {
    if (!on_ || (last_.seconds() < 0.1 && done < steps_)) return;
    last_.reset();
    const int width = 30;
    int fill = steps_ > 0 ? static_cast<int>(width * done / steps_) : width;
    double eta = done > 0 ? sw_.seconds() * (steps_ - done) / done : 0;
    std::string bar(fill, '=');
    if (fill < width) bar += '>' + std::string(width - fill - 1, ' ');
    console_status(fmt::format("  epoch {}/{} [{}] {}/{}  ETA {:.0f}s  loss {:.4f} ", epoch_ + 1,
                               epochs_, bar, done, steps_, eta, loss()));
  }
  void finish() {
    if (on_) console_status("");
  }

 private:
  bool on_;
  int epoch_, epochs_;
  int64_t steps_;
  Stopwatch sw_, last_;
};

// Progress of an evaluation on rank 0: the console's status line on a terminal (status), and a
// log line every 30 s once it has run that long (log), so a long evaluation is never silent.
class EvalProgress {
 public:
  EvalProgress(bool status, bool log, std::string what)
      : status_(status), log_(log), what_(std::move(what)) {}
  ~EvalProgress() {
    if (status_) console_status("");
  }
  void update(int64_t done, int64_t total) {
    const double t = sw_.seconds();
    const auto text = [&] {
      return fmt::format("evaluating ({}): {}/{} batches, {:.0f} s", what_, done, total, t);
    };
    if (status_ && (t - last_status_ >= 0.1 || done == total)) {
      console_status("  " + text());
      last_status_ = t;
    }
    if (log_ && t - last_log_ >= 30) {
      DSP_INFO("train", "{}", text());
      last_log_ = t;
    }
  }

 private:
  bool status_, log_;
  std::string what_;
  Stopwatch sw_;
  double last_status_ = -1, last_log_ = 0;
};

}  // namespace dsp
