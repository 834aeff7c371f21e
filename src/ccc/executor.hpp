#pragma once
// One thread that runs submitted tasks in FIFO order. It is the rank's communication executor: MPI
// is only ever called from this thread (one thread issuing collectives is 3-12x cheaper here than
// several threads under MPI_THREAD_MULTIPLE), and workers hand it ops and wait on a future.
//
// Generic on purpose: the coordinator reuses it. Hooks let the owner run code on the executor
// thread itself (MPI_Init_thread / MPI_Finalize must be called by the thread that makes the MPI
// calls) and service background work (timeout status queries) while no task is queued.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

namespace dsp {

class CommExecutor {
 public:
  struct Hooks {
    std::function<void()> on_start;  // first thing on the thread; an exception fails construction
    std::function<void()> on_idle;   // every idle_period while the queue is empty
    std::function<void()> on_stop;   // last thing on the thread, after the queue is drained
    std::chrono::milliseconds idle_period{20};
  };

  explicit CommExecutor(std::string name = "comm");
  CommExecutor(std::string name, Hooks hooks);
  // Runs every task already submitted, then on_stop, then joins.
  ~CommExecutor();
  CommExecutor(const CommExecutor&) = delete;
  CommExecutor& operator=(const CommExecutor&) = delete;

  // Queues fn; the future yields its result or rethrows its exception. `label` names the task in
  // logs and in current_label(). Throws dsp::Error after stop().
  template <class F>
  auto submit(std::string label, F&& fn) -> std::future<std::invoke_result_t<std::decay_t<F>>> {
    using R = std::invoke_result_t<std::decay_t<F>>;
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(fn));
    std::future<R> fut = task->get_future();
    push(std::move(label), [task] { (*task)(); });
    return fut;
  }

  // Runs fn on the executor and waits; runs it inline when called from the executor itself (a
  // task that submits and waits on its own executor would otherwise deadlock).
  template <class F>
  auto run(std::string label, F&& fn) -> std::invoke_result_t<std::decay_t<F>> {
    if (on_executor_thread()) return fn();
    return submit(std::move(label), std::forward<F>(fn)).get();
  }

  // Drains the queue, runs on_stop and joins; idempotent. Later submits throw.
  void stop();

  bool on_executor_thread() const { return std::this_thread::get_id() == thread_id_; }
  const std::string& name() const { return name_; }
  size_t pending() const;
  uint64_t completed() const;  // tasks finished; moves just after the task's future is ready
  // CPU seconds the executor thread has used so far (running tasks, waiting inside them, idle
  // hooks); 0 once it has stopped.
  double cpu_seconds() const;

 private:
  struct Item {
    std::string label;
    std::function<void()> fn;
  };
  void push(std::string label, std::function<void()> fn);
  void loop();

  std::string name_;
  Hooks hooks_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stopping_ = false;
  bool stopped_ = false;
  uint64_t completed_ = 0;
  std::exception_ptr start_error_;
  std::thread thread_;
  std::thread::id thread_id_;
};

}  // namespace dsp
