// The MPI backend's process-wide runtime: initialization and finalization on the executor thread,
// waiting with timeouts, and the job's life cycle (see mpi_runtime.hpp): abort notices, the
// liveness probe when the launcher ends the job, and the exit barrier.
#include "ccc/mpi/mpi_runtime.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "ccc/executor.hpp"
#include "ccc/mpi/peer_watch.hpp"
#include "core/error.hpp"
#include "core/interrupt.hpp"
#include "core/logging.hpp"

namespace dsp {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kTagQuery = 101;  // on a control communicator: int64 op number of the asker
constexpr int kTagReply = 102;  // on a control communicator: StatusReply as bytes
// On the runtime's job communicator:
constexpr int kTagAbort = 111;    // int32 exit code: the sender ends the job (and said why)
constexpr int kTagPing = 112;     // are you there? (the launcher is ending the job)
constexpr int kTagPong = 113;     // yes
constexpr int kTagBye = 114;      // int64 pairs (communicator index, ops started): finished
constexpr int kTagPastEnd = 115;  // PastEndNote: the receiver finished, the sender went on
constexpr int kTagAck = 116;      // the past-end note arrived (and its receiver spoke)

// How long the ranks listen for each other once the launcher ends the job: OpenMPI sends SIGKILL
// one second after SIGTERM (odls_base_sigkill_timeout).
constexpr milliseconds kProbeWindow{400};
// How long a timed-out rank collects its peers' answers (at most the op timeout).
constexpr milliseconds kQueryGrace{2000};
// How long a rank that leaves the message to a lower rank waits before speaking itself.
constexpr milliseconds kDeferWait{3000};

std::atomic<bool> g_abort_requested{false};
std::atomic<int> g_abort_code{1};
std::atomic<int> g_signal{0};
std::atomic<bool> g_peer_aborting{false};
// This process handles a timeout (of an op on any of its communicators): its status replies say
// so, and a higher rank timing out meanwhile, maybe in another op, leaves the message to it.
std::atomic<bool> g_timing_out{false};
std::atomic<int> g_job_size{0};
std::atomic<int> g_job_rank{0};
std::atomic<bool> g_printed{false};

std::mutex g_rt_mu;
MpiRuntime* g_rt = nullptr;
// The SIGINT and SIGTERM handlers before init_mpi's (the CLI's), put back by finalize_mpi.
struct sigaction g_old_int {}, g_old_term {};

// "dsp: <line>" on stderr, at most once per process: a job ends with one message per rank at most,
// and a rank that learns a peer is ending the job says nothing.
void print_once(const std::string& line) {
  std::fflush(stdout);
  if (g_printed.exchange(true)) return;
  std::string s = "dsp: " + line + "\n";
  std::fwrite(s.data(), 1, s.size(), stderr);
  std::fflush(stderr);
}

void on_sigterm(int sig) {
  // The executor acts within milliseconds (service_all). A second signal, or the alarm when the
  // executor is stuck outside MPI, ends the process the default way. The peers' watch learns at
  // once that the launcher ends this rank (it did not vanish).
  peer_watch::mark('T');
  if (g_signal.exchange(sig) != 0) _exit(128 + sig);
  alarm(2);
}

[[noreturn]] void exit_on_signal() {
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(128 + g_signal.load());
}

void copy_str(char* dst, size_t cap, const std::string& s) {
  size_t n = std::min(cap - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

template <class T>
std::vector<char> bytes_of(const T& v) {
  const char* p = reinterpret_cast<const char*>(&v);
  return std::vector<char>(p, p + sizeof(T));
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() > 1 ? "ranks " : "rank ";
  for (size_t i = 0; i < ranks.size(); ++i) s += fmt::format("{}{}", i ? ", " : "", ranks[i]);
  return s;
}

void sleep_briefly() { std::this_thread::sleep_for(std::chrono::microseconds(500)); }

}  // namespace

std::string mpi_error_string(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", code);
  return std::string(buf, static_cast<size_t>(len));
}

// ---------------------------------------------------------------------------------------------
// Runtime: creation, initialization, finalization

MpiRuntime* MpiRuntime::existing() {
  std::lock_guard<std::mutex> lock(g_rt_mu);
  return g_rt;
}

MpiRuntime& MpiRuntime::get() {
  std::lock_guard<std::mutex> lock(g_rt_mu);
  if (!g_rt) {
    g_rt = new MpiRuntime();  // intentionally leaked, see the class comment
    std::atexit([] {
      try {
        g_rt->exec_->stop();
      } catch (...) {
      }
    });
  }
  return *g_rt;
}

MpiRuntime::MpiRuntime() {
  try {
    exit_timeout_ = detail::default_timeout(CommOptions{});
  } catch (const Error&) {
    exit_timeout_ = CommOptions{}.timeout;  // the communicator reports the malformed variable
  }
  CommExecutor::Hooks hooks;
  hooks.on_start = [this] { init_mpi(); };
  hooks.on_idle = [this] { service_all(); };
  hooks.on_stop = [this] { finalize_mpi(); };
  hooks.idle_period = milliseconds(20);
  exec_ = std::make_unique<CommExecutor>("mpi", std::move(hooks));
}

void MpiRuntime::init_mpi() {
  int inited = 0, fin = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&fin);
  DSP_CHECK_T(CommError, !fin, "mpi: MPI was already finalized; cannot create a communicator");
  if (!inited) {
    int provided = 0;
    int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    DSP_CHECK_T(CommError, rc == MPI_SUCCESS, "mpi: MPI_Init_thread failed: {}",
                mpi_error_string(rc));
    we_initialized_ = true;
    // FUNNELED would do (this thread is the init thread and makes every call), so accept it.
    DSP_CHECK_T(CommError, provided >= MPI_THREAD_FUNNELED,
                "mpi: MPI_Init_thread provided thread level {}, need at least FUNNELED", provided);
  } else {
    // The application initialized MPI on some other thread: our executor may call MPI only if
    // the library accepts calls from any one thread at a time.
    int provided = 0, is_main = 0;
    MPI_Query_thread(&provided);
    MPI_Is_thread_main(&is_main);
    DSP_CHECK_T(CommError, provided >= MPI_THREAD_SERIALIZED || is_main,
                "mpi: MPI was initialized with thread level {}; dsp makes its MPI calls from its "
                "communication thread and needs MPI_THREAD_SERIALIZED (or let dsp initialize MPI)",
                provided);
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  DSP_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &job_));
  DSP_MPI_CHECK(MPI_Comm_set_errhandler(job_, MPI_ERRORS_RETURN));
  peers_.assign(static_cast<size_t>(size_), Peer());
  if (we_initialized_ && size_ > 1) {
    hosts_ = peer_watch::start(job_, rank_, size_,
                               [this](const std::vector<int>& gone) { on_vanished(gone); });
    // The launcher ends the job with SIGTERM (after SIGCONT, before SIGKILL), and Ctrl-C reaches
    // the ranks of a terminal's job as SIGINT: find out who vanished first (on_terminate). Only
    // when dsp owns MPI: an application's handlers stay.
    struct sigaction sa {};
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, &g_old_term);
    sigaction(SIGINT, &sa, &g_old_int);
  }
}

void MpiRuntime::finalize_mpi() {
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin && we_initialized_ && size_ > 1 && job_ != MPI_COMM_NULL) exit_barrier();
  peer_watch::mark('B');  // every peer has finished too, or this rank would not be here
  g_job_size = 0;
  for (auto* s : live_) s->free_replies();
  if (!fin && job_ != MPI_COMM_NULL) {
    for (auto& o : out_) MPI_Request_free(&o.req);
    out_.clear();
    MPI_Comm_free(&job_);
  }
  if (we_initialized_ && !fin) MPI_Finalize();
  if (we_initialized_ && size_ > 1) {
    sigaction(SIGTERM, &g_old_term, nullptr);
    sigaction(SIGINT, &g_old_int, nullptr);
  }
  finalized_ = true;
}

void MpiRuntime::add(MpiCommunicator::State* s) {
  live_.push_back(s);
  if (s->timeout.count() == 0) exit_timeout_unbounded_ = true;
  exit_timeout_ = std::max(exit_timeout_, s->timeout);
  g_job_rank = s->rank;
  g_job_size = s->size;
}

void MpiRuntime::remove(MpiCommunicator::State* s) {
  retired_[s->index] = s->seq;
  live_.remove(s);
}

bool MpiRuntime::peer_aborting() const { return g_peer_aborting.load(); }

void MpiRuntime::poll_notices() { poll_job(); }

// ---------------------------------------------------------------------------------------------
// Notices on the job communicator

void MpiRuntime::post(int peer, int tag, std::vector<char> bytes) {
  out_.push_back(Outgoing{std::move(bytes), MPI_REQUEST_NULL});
  Outgoing& o = out_.back();
  if (MPI_Isend(o.buf.data(), static_cast<int>(o.buf.size()), MPI_BYTE, peer, tag, job_, &o.req) !=
      MPI_SUCCESS) {
    out_.pop_back();
  }
}

void MpiRuntime::progress_out() {
  for (auto it = out_.begin(); it != out_.end();) {
    int done = 0;
    if (MPI_Test(&it->req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 1;
    it = done ? out_.erase(it) : std::next(it);
  }
}

void MpiRuntime::poll_job() {
  if (job_ == MPI_COMM_NULL || finalized_) return;
  progress_out();
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, job_, &flag, &st) != MPI_SUCCESS || !flag) break;
    int bytes = 0;
    MPI_Get_count(&st, MPI_BYTE, &bytes);
    std::vector<char> buf(static_cast<size_t>(std::max(bytes, 1)));
    MPI_Recv(buf.data(), bytes, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, job_, MPI_STATUS_IGNORE);
    Peer& p = peers_[st.MPI_SOURCE];
    switch (st.MPI_TAG) {
      case kTagAbort:
        g_peer_aborting = true;
        break;
      case kTagPing:
        post(st.MPI_SOURCE, kTagPong, {});
        break;
      case kTagPong:
        p.pong = true;
        break;
      case kTagBye: {
        p.bye = true;
        std::vector<int64_t> v(static_cast<size_t>(bytes) / sizeof(int64_t));
        std::memcpy(v.data(), buf.data(), v.size() * sizeof(int64_t));
        for (size_t i = 0; i + 1 < v.size(); i += 2) p.ops[v[i]] = v[i + 1];
        break;
      }
      case kTagPastEnd:
        if (bytes == static_cast<int>(sizeof(PastEndNote)) && !past_end_) {
          std::memcpy(&past_end_note_, buf.data(), sizeof(PastEndNote));
          past_end_ = true;
          past_end_peer_ = st.MPI_SOURCE;
        }
        break;
      case kTagAck:
        p.ack = true;
        break;
      default:
        break;
    }
  }
}

void MpiRuntime::service_all() {
  if (finalized_) return;
  if (g_abort_requested.load()) abort_now(g_abort_code.load());
  if (g_signal.load()) on_terminate();
  poll_job();
  for (auto* s : live_) s->service_queries();
}

void MpiRuntime::abort_now(int code) {
  peer_watch::mark('A');
  if (job_ != MPI_COMM_NULL && !finalized_) {
    const int32_t c = code;
    for (int p = 0; p < size_; ++p) {
      if (p != rank_) post(p, kTagAbort, bytes_of(c));
    }
    // Small sends complete at once; bounded in case a peer is gone.
    const auto until = Clock::now() + milliseconds(300);
    while (!out_.empty() && Clock::now() < until) {
      progress_out();
      sleep_briefly();
    }
  }
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this keeps [[noreturn]] honest if it ever does
}

void MpiRuntime::quiet_end() {
  g_printed = true;  // the peer said why; anything this rank adds would only mislead
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < until) {
    if (g_signal.load()) exit_on_signal();
    poll_job();
    std::this_thread::sleep_for(milliseconds(2));
  }
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

void MpiRuntime::on_terminate() {
  // The launcher (or the user) is ending the job. If a peer announced an abort it has said why;
  // otherwise ask who is still there: ranks that do not answer vanished (killed by a signal,
  // crashed, stopped, host lost), and the lowest rank that is still there names them; when every
  // rank answers, the job was interrupted and rank 0 says so (core/interrupt.hpp's line).
  if (job_ != MPI_COMM_NULL && size_ > 1 && !g_peer_aborting.load()) {
    // Not to a rank the watch saw vanish: OpenMPI's TCP transport would block this thread on
    // reconnecting to it until the launcher's SIGKILL.
    for (int p = 0; p < size_; ++p) {
      if (p != rank_ && !peers_[p].bye && !peer_watch::vanished(p)) post(p, kTagPing, {});
    }
    const auto until = Clock::now() + kProbeWindow;
    while (Clock::now() < until && !g_peer_aborting.load()) {
      poll_job();
      sleep_briefly();
    }
    std::vector<int> gone;
    bool lowest = true;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_) continue;
      if (peers_[p].pong || peers_[p].bye) {
        lowest = lowest && p > rank_;
      } else {
        gone.push_back(p);
      }
    }
    if (!g_peer_aborting.load() && gone.empty() && lowest) print_once(interrupt_message());
    if (!g_peer_aborting.load() && !gone.empty() && lowest) {
      std::string doing;
      for (auto* s : live_) {
        if (s->in_op) {
          doing = fmt::format("; rank {} was waiting in {}", rank_, s->describe_op());
          break;
        }
      }
      print_once(fmt::format(
          "{}: no answer when the launcher ended the job (killed by a signal, crashed, stopped, "
          "or its host went away){}",
          vanished_ranks(gone), doing));
    }
  }
  exit_on_signal();
}

std::string MpiRuntime::vanished_ranks(const std::vector<int>& gone) const {
  std::string s = rank_list(gone) + " vanished";
  if (hosts_.size() != static_cast<size_t>(size_)) return s;
  s += gone.size() > 1 ? " (hosts " : " (host ";
  for (size_t i = 0; i < gone.size(); ++i) s += (i ? ", " : "") + hosts_[gone[i]];
  return s + ")";
}

void MpiRuntime::on_vanished(const std::vector<int>& gone) {
  // Silent when the job ends for a reason someone else reports; the lowest rank still there
  // speaks. The launcher then ends the job (or, if it does not, the collective timeout does).
  if (g_peer_aborting.load() || g_signal.load() || peer_watch::peer_ending()) return;
  for (int p = 0; p < rank_; ++p) {
    if (!peer_watch::vanished(p)) return;
  }
  print_once(fmt::format(
      "{}: its connection to rank {} closed without a word (killed by a signal, or crashed)",
      vanished_ranks(gone), rank_));
}

// ---------------------------------------------------------------------------------------------
// Ranks that issue different collectives: the exit barrier and its counterpart in waits

int MpiRuntime::finished_before(int64_t index, int64_t seq) const {
  for (int p = 0; p < size_; ++p) {
    const Peer& q = peers_[p];
    if (!q.bye) continue;
    auto it = q.ops.find(index);
    const int64_t started = it == q.ops.end() ? -1 : it->second;
    if (started < seq) return p;
  }
  return -1;
}

void MpiRuntime::past_end(int peer, int64_t index, int64_t seq, const std::string& what) {
  PastEndNote note{};
  note.index = index;
  note.seq = seq;
  copy_str(note.what, sizeof(note.what), what);
  post(peer, kTagPastEnd, bytes_of(note));
  // Let the finished rank speak first: this rank's abort ends it.
  const auto until = Clock::now() + milliseconds(500);
  while (!peers_[peer].ack && Clock::now() < until) {
    poll_job();
    sleep_briefly();
  }
  auto it = peers_[peer].ops.find(index);
  std::string started = it == peers_[peer].ops.end()
                            ? std::string("it never created this communicator")
                            : fmt::format("after {} op(s) on this communicator", it->second);
  print_once(fmt::format(
      "{} on rank {} cannot complete: rank {} has finished ({}); every rank must issue the same "
      "collectives (create the same loaders and jobs, iterate the same epochs)",
      what, rank_, peer, started));
  abort_now(1);
}

void MpiRuntime::finished_peer_went_on() {
  const PastEndNote& n = past_end_note_;
  int64_t mine = -1;
  if (auto it = retired_.find(n.index); it != retired_.end()) mine = it->second;
  for (auto* s : live_) {
    if (s->index == n.index) mine = s->seq;
  }
  std::string own = mine < 0 ? std::string("had not created that communicator")
                             : fmt::format("had finished after {} op(s) on it", mine);
  print_once(fmt::format(
      "rank {} finished, but rank {} went on to {} (this rank {}); every rank must issue the same "
      "collectives (create the same loaders and jobs, iterate the same epochs)",
      rank_, past_end_peer_, n.what, own));
  post(past_end_peer_, kTagAck, {});
  quiet_end();
}

void MpiRuntime::exit_barrier() {
  std::vector<int64_t> table;
  for (const auto& [index, ops] : retired_) {
    table.push_back(index);
    table.push_back(ops);
  }
  for (auto* s : live_) {
    table.push_back(s->index);
    table.push_back(s->seq);
  }
  const char* raw = reinterpret_cast<const char*>(table.data());
  const std::vector<char> bye(raw, raw + table.size() * sizeof(int64_t));
  for (int p = 0; p < size_; ++p) {
    if (p != rank_) post(p, kTagBye, bye);
  }
  detail::AwakeTimer awake;
  for (;;) {
    service_all();
    if (past_end_) finished_peer_went_on();
    if (g_peer_aborting.load()) quiet_end();
    std::vector<int> waiting;
    for (int p = 0; p < size_; ++p) {
      if (p != rank_ && !peers_[p].bye) waiting.push_back(p);
    }
    if (waiting.empty()) break;
    if (!exit_timeout_unbounded_ && awake.elapsed() > exit_timeout_) {
      print_once(fmt::format(
          "rank {} finished, but {} did not finish within {:.1f} s (the communicator timeout, "
          "DSP_COMM_TIMEOUT)",
          rank_, rank_list(waiting), exit_timeout_.count() / 1e3));
      abort_now(1);
    }
    std::this_thread::sleep_for(milliseconds(1));
  }
  const auto until = Clock::now() + milliseconds(500);
  while (!out_.empty() && Clock::now() < until) {
    progress_out();
    sleep_briefly();
  }
}

void MpiRuntime::wait_create(MPI_Request* reqs, int n, int64_t index, milliseconds timeout) {
  detail::AwakeTimer awake;
  for (;;) {
    int done = 0;
    DSP_MPI_CHECK(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE));
    if (done) return;
    service_all();
    if (int p = finished_before(index, 0); p >= 0) {
      past_end(p, index, 0, fmt::format("creating communicator #{}", index));
    }
    if (timeout.count() > 0 && awake.elapsed() > timeout) {
      if (peer_aborting()) quiet_end();
      print_once(fmt::format(
          "creating communicator #{} timed out after {:.1f} s on rank {}: every rank must create "
          "the same communicators (loaders, jobs) in the same order",
          index, timeout.count() / 1e3, rank_));
      abort_now(1);
    }
    sleep_briefly();
  }
}

// ---------------------------------------------------------------------------------------------
// One communicator: waiting, status queries, timeouts

void MpiCommunicator::State::begin(const char* name, const OpOptions& o) {
  ++seq;
  in_op = true;
  op_name = name;
  op_label = o.label;
  op_start = Clock::now();
  op_timeout = detail::op_timeout(o, timeout);
}

std::string MpiCommunicator::State::describe_op() const {
  std::string label = op_label.empty() ? "" : fmt::format(", label '{}'", op_label);
  return fmt::format("collective '{}' (op #{}{})", op_name, seq, label);
}

void MpiCommunicator::State::service_queries() {
  for (;;) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kTagQuery, ctl, &flag, &st) != MPI_SUCCESS || !flag) break;
    int64_t asker_seq = 0;
    MPI_Recv(&asker_seq, 1, MPI_INT64_T, st.MPI_SOURCE, kTagQuery, ctl, MPI_STATUS_IGNORE);
    replies.emplace_back();
    PendingReply& r = replies.back();
    std::memset(&r.msg, 0, sizeof(r.msg));
    r.msg.seq = seq;
    r.msg.in_op = in_op ? 1 : 0;
    r.msg.timing_out = timing_out ? 1 : 0;
    r.msg.process_timing_out = g_timing_out.load() ? 1 : 0;
    copy_str(r.msg.name, sizeof(r.msg.name), op_name);
    copy_str(r.msg.label, sizeof(r.msg.label), op_label);
    MPI_Isend(&r.msg, sizeof(r.msg), MPI_BYTE, st.MPI_SOURCE, kTagReply, ctl, &r.req);
  }
  for (auto it = replies.begin(); it != replies.end();) {
    int done = 0;
    MPI_Test(&it->req, &done, MPI_STATUS_IGNORE);
    it = done ? replies.erase(it) : std::next(it);
  }
}

void MpiCommunicator::State::free_replies() {
  for (auto& r : replies) MPI_Request_free(&r.req);
  replies.clear();
}

void MpiCommunicator::State::wait(MPI_Request* reqs, int n) {
  // Spin first (most ops finish in microseconds), then yield briefly, then sleep: ranks and their
  // workers share cores, and a waiter that spins or yields takes the CPU from the threads it
  // waits for. The sleep grows with the time waited (1/16 of it, 50 us to 1 ms), so a long wait
  // (a peer still computing) costs a few hundred wake-ups a second instead of one every 50 us,
  // and completes at most ~6% (or 1 ms) late. The timeout counts
  // only time this process was awake (a stopped rank must not blame its peers when it resumes).
  detail::AwakeTimer awake;
  auto last_service = Clock::now();
  for (long it = 0;; ++it) {
    int done = 0;
    DSP_MPI_CHECK(MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE));
    if (done) return;
    if (it < 64) continue;
    const auto now = Clock::now();
    const auto waited = awake.elapsed();
    if (now - last_service > milliseconds(2)) {
      rt->service_all();
      if (int p = rt->finished_before(index, seq); p >= 0)
        rt->past_end(p, index, seq, describe_op());
      last_service = now;
    }
    if (op_timeout.count() > 0 && waited > op_timeout) {
      if (rt->peer_aborting()) rt->quiet_end();
      timed_out(waited.count() / 1e3);
    }
    const auto since_start = now - op_start;
    if (since_start < std::chrono::microseconds(100)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::clamp<Clock::duration>(
          since_start / 16, std::chrono::microseconds(50), milliseconds(1)));
    }
  }
}

namespace {

// The peers' answers to a timed-out rank's status query, by rank.
struct PeerAnswers {
  std::vector<StatusReply> ans;
  std::vector<char> got;
};

// Sends op number *my_seq to every peer of s as a status query. The number and the requests must
// outlive the sends (timed_out never returns).
void send_queries(const MpiCommunicator::State& s, const int64_t* my_seq,
                  std::vector<MPI_Request>& queries) {
  for (int p = 0; p < s.size; ++p) {
    if (p == s.rank) continue;
    queries.emplace_back();
    MPI_Isend(my_seq, 1, MPI_INT64_T, p, kTagQuery, s.ctl, &queries.back());
  }
}

// Collects the peers' answers for up to `grace`, meanwhile answering the queries of peers timing
// out too; ends quietly if a peer announces that it ends the job.
PeerAnswers collect_answers(const MpiCommunicator::State& s, milliseconds grace) {
  PeerAnswers a{std::vector<StatusReply>(s.size), std::vector<char>(s.size, 0)};
  int missing = s.size - 1;
  const auto until = Clock::now() + grace;
  while (missing > 0 && Clock::now() < until) {
    int flag = 0;
    MPI_Status st;
    MPI_Iprobe(MPI_ANY_SOURCE, kTagReply, s.ctl, &flag, &st);
    if (flag) {
      StatusReply r;
      MPI_Recv(&r, sizeof(r), MPI_BYTE, st.MPI_SOURCE, kTagReply, s.ctl, MPI_STATUS_IGNORE);
      if (!a.got[st.MPI_SOURCE]) --missing;
      a.got[st.MPI_SOURCE] = 1;
      a.ans[st.MPI_SOURCE] = r;
      continue;
    }
    // Peers stuck in this same op time out too and ask us; answering lets them name the culprit.
    s.rt->service_all();
    if (s.rt->peer_aborting()) s.rt->quiet_end();
    std::this_thread::sleep_for(milliseconds(1));
  }
  return a;
}

// The peers that did not arrive at op #my_seq, each with why: "p (why), ..." (empty: none).
// Sets *lower_speaks when a lower rank will print the timeout instead: one stuck in this same op
// (timing out already, or about to: its deadline is as near as ours), or timing out in any op
// (ranks stuck behind one missing peer time out in whatever op each waits in).
std::string late_peers(const MpiCommunicator::State& s, const PeerAnswers& a, int64_t my_seq,
                       milliseconds grace, bool* lower_speaks) {
  std::string late;
  for (int p = 0; p < s.size; ++p) {
    if (p == s.rank) continue;
    const StatusReply& r = a.ans[p];
    *lower_speaks = *lower_speaks || (p < s.rank && a.got[p] && r.process_timing_out);
    std::string why;
    if (!a.got[p]) {
      why = fmt::format(
          "not responding: no answer within {:.1f} s; stopped, hung outside MPI, or "
          "unreachable",
          grace.count() / 1e3);
    } else if (r.seq >= my_seq) {
      *lower_speaks = *lower_speaks || (p < s.rank && r.seq == my_seq && (r.timing_out || r.in_op));
      continue;  // started this op (or finished it): arrived
    } else if (r.in_op) {
      why = fmt::format("still in op #{} '{}'", r.seq, r.name);
    } else {
      why = fmt::format("idle after op #{}", r.seq);
    }
    late += fmt::format("{}{} ({})", late.empty() ? "" : ", ", p, why);
  }
  return late;
}

// Leaves the message to a lower rank: waits up to kDeferWait for it to announce that it ends the
// job, answering queries and notices meanwhile.
void defer_to_lower_rank(MpiRuntime& rt) {
  const auto defer_until = Clock::now() + kDeferWait;
  while (Clock::now() < defer_until && !rt.peer_aborting()) {
    rt.service_all();
    std::this_thread::sleep_for(milliseconds(1));
  }
}

}  // namespace

void MpiCommunicator::State::timed_out(double waited) {
  timing_out = true;
  g_timing_out = true;
  const int64_t my_seq = seq;
  std::vector<MPI_Request> queries;
  send_queries(*this, &my_seq, queries);
  const auto grace = std::min<milliseconds>(kQueryGrace, op_timeout);
  const PeerAnswers answers = collect_answers(*this, grace);
  // A lower rank that prints (late_peers) is left to it; we stay quiet unless it has not
  // announced its abort within kDeferWait.
  bool lower_speaks = false;
  std::string late = late_peers(*this, answers, my_seq, grace, &lower_speaks);
  if (late.empty()) late = "none found (every rank answered that it had arrived)";
  if (lower_speaks) defer_to_lower_rank(*rt);
  if (rt->peer_aborting()) rt->quiet_end();
  print_once(fmt::format("{} timed out after {:.1f} s on rank {}; ranks that did not arrive: {}",
                         describe_op(), waited, rank, late));
  rt->abort_now(1);
}

// ---------------------------------------------------------------------------------------------
// Public statics of MpiCommunicator that concern the whole job

int MpiCommunicator::job_size() { return g_job_size.load(); }
int MpiCommunicator::job_rank() { return g_job_rank.load(); }

void MpiCommunicator::abort_process(const std::string& message, int exit_code) {
  int inited = 0, fin = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&fin);
  MpiRuntime* rt = inited && !fin ? MpiRuntime::existing() : nullptr;
  const bool on_executor = rt && rt->exec().on_executor_thread();
  if (rt && g_job_rank.load() > 0 && !g_peer_aborting.load()) {
    // When every rank fails at once (the same bad input), one message is enough: the others give
    // the lowest a moment to announce its abort first.
    const auto until = Clock::now() + milliseconds(300);
    while (Clock::now() < until && !g_peer_aborting.load()) {
      if (on_executor) rt->poll_notices();
      std::this_thread::sleep_for(milliseconds(2));
    }
  }
  if (g_peer_aborting.load() || g_signal.load()) {
    g_printed = true;  // a peer (or the launcher) is ending the job and has said why
  } else {
    print_once(message);
  }
  if (!rt) {
    std::fflush(stdout);
    if (inited && !fin) MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
  }
  g_abort_code = exit_code;
  if (on_executor) rt->abort_now(exit_code);
  g_abort_requested = true;
  const auto until = Clock::now() + std::chrono::seconds(2);
  while (Clock::now() < until) std::this_thread::sleep_for(milliseconds(5));
  // The executor is stuck outside MPI: MPI_Abort from here is the last resort.
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

}  // namespace dsp
