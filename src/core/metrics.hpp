#pragma once
// A thread-safe registry of named counters, gauges and timers that dumps to JSON.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace dsp {

class Metrics {
 public:
  void add(const std::string& counter, int64_t delta = 1);
  void set(const std::string& gauge, double value);
  // Accumulates a duration: total seconds and number of samples.
  void time(const std::string& timer, double seconds);

  int64_t counter(const std::string& name) const;
  double gauge(const std::string& name) const;
  double timer_total(const std::string& name) const;
  int64_t timer_count(const std::string& name) const;

  nlohmann::json to_json() const;
  // Writes to_json() to `path` atomically (temp file + rename).
  void dump(const std::string& path) const;
  void clear();

  // The process-wide registry.
  static Metrics& global();

 private:
  struct Timer {
    double total = 0;
    int64_t count = 0;
  };
  mutable std::mutex mu_;
  std::map<std::string, int64_t> counters_;
  std::map<std::string, double> gauges_;
  std::map<std::string, Timer> timers_;
};

}  // namespace dsp
