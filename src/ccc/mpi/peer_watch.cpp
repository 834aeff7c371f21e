#include "ccc/mpi/peer_watch.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "core/logging.hpp"

namespace dsp::peer_watch {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kMaxAddrs = 8;
constexpr int kMaxRanks = 4096;             // fds are kept in a fixed array for the signal handler
constexpr milliseconds kConnectWait{2000};  // per address and per handshake
constexpr milliseconds kAcceptWait{10000};  // for the higher ranks' connections, all made

struct Card {  // what a rank tells the others, allgathered as raw bytes (same binary everywhere)
  uint64_t nonce;
  uint32_t addrs[kMaxAddrs];  // IPv4, network order; non-loopback interfaces that are up
  int32_t naddrs;
  uint16_t port;
  char host[64];
};
struct Hello {  // both directions of a new connection
  uint64_t nonce;
  int32_t rank;
};

int g_fds[kMaxRanks];
std::atomic<int> g_nfds{0};  // entries of g_fds in use (by rank; -1: unwatched or self)
std::atomic<char> g_marks[kMaxRanks];
std::atomic<bool> g_vanished[kMaxRanks];
std::atomic<bool> g_peer_ending{false};

bool wait_fd(int fd, short events, milliseconds limit) {
  pollfd p{fd, events, 0};
  return ::poll(&p, 1, static_cast<int>(limit.count())) == 1 && (p.revents & events);
}

bool send_all(int fd, const void* buf, size_t n) {
  return ::send(fd, buf, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
}

bool recv_hello(int fd, Hello* h) {
  size_t got = 0;
  const auto until = Clock::now() + kConnectWait;
  while (got < sizeof(Hello)) {
    const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now());
    if (left.count() <= 0 || !wait_fd(fd, POLLIN, left)) return false;
    ssize_t n = ::recv(fd, reinterpret_cast<char*>(h) + got, sizeof(Hello) - got, 0);
    if (n <= 0) return false;
    got += static_cast<size_t>(n);
  }
  return true;
}

Card my_card(uint64_t nonce, uint16_t port) {
  Card c{};
  c.nonce = nonce;
  c.port = port;
  ::gethostname(c.host, sizeof(c.host) - 1);
  ifaddrs* ifs = nullptr;
  if (::getifaddrs(&ifs) == 0) {
    for (ifaddrs* i = ifs; i && c.naddrs < kMaxAddrs; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
          (i->ifa_flags & IFF_LOOPBACK)) {
        continue;
      }
      c.addrs[c.naddrs++] = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
    }
    ::freeifaddrs(ifs);
  }
  return c;
}

// A connection to `peer` with this rank's hello sent (the peer accepts it later: the kernel's
// backlog completes the connection meanwhile), or -1.
int connect_to(const Card& peer, bool same_host, const Hello& mine) {
  std::vector<uint32_t> addrs(peer.addrs, peer.addrs + std::clamp(peer.naddrs, 0, kMaxAddrs));
  if (same_host) addrs.insert(addrs.begin(), htonl(INADDR_LOOPBACK));
  for (uint32_t a : addrs) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(peer.port);
    sa.sin_addr.s_addr = a;
    int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
    int err = 0;
    socklen_t len = sizeof(err);
    bool ok = rc == 0 || (errno == EINPROGRESS && wait_fd(fd, POLLOUT, kConnectWait) &&
                          ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0);
    if (ok && send_all(fd, &mine, sizeof(mine))) return fd;
    ::close(fd);
  }
  return -1;
}

// Accepts `expected` connections of higher ranks (each already made: see connect_to) and answers
// each hello, within kAcceptWait.
void accept_higher(int lfd, int rank, int size, int expected, uint64_t nonce) {
  const auto until = Clock::now() + kAcceptWait;
  while (expected > 0) {
    const auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now());
    if (left.count() <= 0 || !wait_fd(lfd, POLLIN, left)) return;
    int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    Hello theirs{}, mine{nonce, rank};
    if (recv_hello(fd, &theirs) && theirs.nonce == nonce && theirs.rank > rank &&
        theirs.rank < size && g_fds[theirs.rank] < 0 && send_all(fd, &mine, sizeof(mine))) {
      g_fds[theirs.rank] = fd;
      --expected;
    } else {
      ::close(fd);
    }
  }
}

// Makes the connections: to every lower rank (hello sent), then, once every rank knows how many
// to expect, accepts the higher ranks' and checks the lower ranks' answers (the handshake tells a
// dsp rank of this job from whatever else listens on that port).
void connect_all(MPI_Comm comm, int rank, int size, int lfd, const std::vector<Card>& cards,
                 const std::vector<std::string>& hosts) {
  const uint64_t job = cards[0].nonce;  // rank 0's: the same on every rank
  const Hello mine{job, rank};
  std::vector<int> made(static_cast<size_t>(size), 0);
  for (int p = 0; p < rank; ++p) {
    if (!cards[p].port) continue;
    g_fds[p] = connect_to(cards[p], hosts[p] == hosts[rank], mine);
    made[p] = g_fds[p] >= 0;
  }
  int expected = 0;
  MPI_Reduce_scatter_block(made.data(), &expected, 1, MPI_INT, MPI_SUM, comm);
  if (lfd >= 0) accept_higher(lfd, rank, size, expected, job);
  for (int p = 0; p < rank; ++p) {
    Hello theirs{};
    if (g_fds[p] >= 0 &&
        !(recv_hello(g_fds[p], &theirs) && theirs.nonce == job && theirs.rank == p)) {
      ::close(g_fds[p]);
      g_fds[p] = -1;
    }
  }
}

// Reads what arrived on a readable connection (a mark); true once it has closed.
bool drain_closed(int p) {
  char buf[16];
  for (;;) {
    ssize_t n = ::recv(g_fds[p], buf, sizeof(buf), 0);
    if (n > 0) {
      char expected = 0;
      g_marks[p].compare_exchange_strong(expected, buf[0]);
      if (buf[0] == 'A' || buf[0] == 'T') g_peer_ending = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));  // 0: closed; error: reset
  }
}

void watch(int size, VanishedFn on_vanished) {
  std::vector<pollfd> fds;
  std::vector<int> rank_of;
  for (int p = 0; p < size; ++p) {
    if (g_fds[p] >= 0) {
      fds.push_back({g_fds[p], POLLIN, 0});
      rank_of.push_back(p);
    }
  }
  std::vector<int> gone;
  auto first = Clock::now();
  for (;;) {
    // Once one rank vanished, 50 ms more for others that went with it (one message names all).
    const int wait = gone.empty() ? -1 : 5;
    if (::poll(fds.data(), fds.size(), wait) < 0 && errno != EINTR) return;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const int p = rank_of[i];
      if (!drain_closed(p)) continue;
      fds[i].fd = -1;  // closed: poll it no more
      if (g_marks[p].load() != 0) continue;
      g_vanished[p] = true;
      if (gone.empty()) first = Clock::now();
      gone.push_back(p);
    }
    if (!gone.empty() && Clock::now() - first >= milliseconds(50)) break;
  }
  if (!g_peer_ending.load()) on_vanished(gone);
}

}  // namespace

std::vector<std::string> start(MPI_Comm comm, int rank, int size, VanishedFn on_vanished) {
  for (int p = 0; p < kMaxRanks; ++p) g_fds[p] = -1;
  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof(sa);
  const bool listening = lfd >= 0 && size <= kMaxRanks &&
                         ::bind(lfd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 &&
                         ::listen(lfd, std::min(size, 1024)) == 0 &&
                         ::getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len) == 0;
  const uint64_t nonce =
      std::random_device{}() * 0x100000001ull ^ static_cast<uint64_t>(::getpid());
  Card mine = my_card(nonce, listening ? ntohs(sa.sin_port) : 0);
  std::vector<Card> cards(static_cast<size_t>(size));
  MPI_Allgather(&mine, sizeof(Card), MPI_BYTE, cards.data(), sizeof(Card), MPI_BYTE, comm);
  std::vector<std::string> hosts;
  for (auto& c : cards) {
    c.host[sizeof(c.host) - 1] = '\0';
    hosts.emplace_back(c.host);
  }
  if (size > kMaxRanks) return hosts;
  connect_all(comm, rank, size, listening ? lfd : -1, cards, hosts);
  if (lfd >= 0) ::close(lfd);
  std::string unwatched;
  for (int p = 0; p < size; ++p) {
    if (p != rank && g_fds[p] < 0) unwatched += (unwatched.empty() ? "" : ", ") + std::to_string(p);
  }
  if (!unwatched.empty()) {
    DSP_WARN("ccc",
             "no TCP connection to rank(s) {} for liveness: if one of them vanishes, only the "
             "launcher names it",
             unwatched);
  }
  g_nfds = size;
  std::thread(watch, size, std::move(on_vanished)).detach();
  return hosts;
}

void mark(char c) {
  const int n = g_nfds.load();
  for (int p = 0; p < n; ++p) {
    if (g_fds[p] >= 0) (void)!::send(g_fds[p], &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
  }
}

bool peer_ending() { return g_peer_ending.load(); }

bool vanished(int rank) { return rank >= 0 && rank < kMaxRanks && g_vanished[rank].load(); }

}  // namespace dsp::peer_watch
