#include "core/metrics.hpp"

#include <sys/resource.h>

#include "core/fs.hpp"
#include "core/timer.hpp"

namespace dsp {

long long peak_rss_bytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<long long>(ru.ru_maxrss) * 1024;
}

namespace {
double rusage_seconds(int who) {
  struct rusage ru {};
  getrusage(who, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}
}  // namespace

double thread_cpu_seconds() { return rusage_seconds(RUSAGE_THREAD); }
double process_cpu_seconds() { return rusage_seconds(RUSAGE_SELF); }

void Metrics::add(const std::string& name, int64_t delta) {
  std::lock_guard<std::mutex> l(mu_);
  counters_[name] += delta;
}
void Metrics::set(const std::string& name, double value) {
  std::lock_guard<std::mutex> l(mu_);
  gauges_[name] = value;
}
void Metrics::time(const std::string& name, double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  auto& t = timers_[name];
  t.total += seconds;
  t.count += 1;
}
int64_t Metrics::counter(const std::string& name) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = counters_.find(name);
  return it == counters_.end() ? 0 : it->second;
}
double Metrics::gauge(const std::string& name) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = gauges_.find(name);
  return it == gauges_.end() ? 0.0 : it->second;
}
double Metrics::timer_total(const std::string& name) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = timers_.find(name);
  return it == timers_.end() ? 0.0 : it->second.total;
}
int64_t Metrics::timer_count(const std::string& name) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = timers_.find(name);
  return it == timers_.end() ? 0 : it->second.count;
}
nlohmann::json Metrics::to_json() const {
  std::lock_guard<std::mutex> l(mu_);
  nlohmann::json j;
  j["counters"] = nlohmann::json::object();
  j["gauges"] = nlohmann::json::object();
  j["timers"] = nlohmann::json::object();
  for (auto& [k, v] : counters_) j["counters"][k] = v;
  for (auto& [k, v] : gauges_) j["gauges"][k] = v;
  for (auto& [k, v] : timers_) j["timers"][k] = {{"total_s", v.total}, {"count", v.count}};
  return j;
}
void Metrics::dump(const std::string& path) const {
  write_file_atomic(path, to_json().dump(2) + "\n");
}
void Metrics::clear() {
  std::lock_guard<std::mutex> l(mu_);
  counters_.clear();
  gauges_.clear();
  timers_.clear();
}
Metrics& Metrics::global() {
  static Metrics m;
  return m;
}

}  // namespace dsp
