#include "backend/tcp_channel.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "backend/clock.h"

namespace pipescope::backend {

namespace {

std::string systemError(const std::string &what) {
  return what + ": " + std::strerror(errno);
}

// Waits until fd is readable (or writable); false on timeout.
bool waitReady(int fd, bool for_writing, double deadline_us) {
  for (;;) {
    const double left_ms = (deadline_us - nowMicroseconds()) / 1000.0;
    if (left_ms <= 0) return false;
    pollfd entry{fd, static_cast<short>(for_writing ? POLLOUT : POLLIN), 0};
    const int ready = ::poll(&entry, 1, static_cast<int>(left_ms) + 1);
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return false;
  }
}

Status writeBytes(int fd, const void *data, std::size_t length, double deadline_us,
                  const std::string &peer) {
  const char *p = static_cast<const char *>(data);
  while (length > 0) {
    if (!waitReady(fd, true, deadline_us)) return makeError("timed out sending to " + peer);
    const ssize_t n = ::send(fd, p, length, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return makeError(systemError("lost the connection to " + peer));
    p += n;
    length -= static_cast<std::size_t>(n);
  }
  return Ok{};
}

Status readBytes(int fd, void *data, std::size_t length, double deadline_us,
                 const std::string &peer) {
  char *p = static_cast<char *>(data);
  while (length > 0) {
    if (!waitReady(fd, false, deadline_us))
      return makeError("no progress while waiting for " + peer);
    const ssize_t n = ::recv(fd, p, length, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n == 0) return makeError("lost the connection to " + peer + " (it stopped)");
    if (n < 0) return makeError(systemError("lost the connection to " + peer));
    p += n;
    length -= static_cast<std::size_t>(n);
  }
  return Ok{};
}

// Framed messages: a 64-bit byte count, then the bytes.
Status sendFrame(int fd, const void *data, std::size_t length, double deadline_us,
                 const std::string &peer) {
  const std::uint64_t size = length;
  if (auto s = writeBytes(fd, &size, sizeof size, deadline_us, peer); !s) return s;
  return writeBytes(fd, data, length, deadline_us, peer);
}

Result<std::vector<char>> receiveFrame(int fd, double deadline_us, const std::string &peer) {
  std::uint64_t size = 0;
  if (auto s = readBytes(fd, &size, sizeof size, deadline_us, peer); !s) return s.error();
  if (size > (std::uint64_t{1} << 32)) return makeError("a malformed message from " + peer);
  std::vector<char> bytes(static_cast<std::size_t>(size));
  if (auto s = readBytes(fd, bytes.data(), bytes.size(), deadline_us, peer); !s) return s.error();
  return bytes;
}

std::string rankName(int rank) {
  return "rank " + std::to_string(rank);
}

class TcpChannel final : public ControlChannel {
public:
  TcpChannel(int rank, int size, std::vector<int> sockets)
      : rank_(rank), size_(size), sockets_(std::move(sockets)) {}
  ~TcpChannel() override { closeAll(); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "TCP"; }

  Result<int> firstFailure(bool ok, double timeout_s) override {
    auto flags = gather({ok ? 1.0 : 0.0}, timeout_s);
    if (!flags) return flags.error();
    std::vector<char> lowest(sizeof(int));
    int first = -1;
    if (rank_ == 0)
      for (int r = 0; r < size_ && first < 0; ++r)
        if ((*flags)[static_cast<std::size_t>(r)].at(0) == 0.0) first = r;
    std::memcpy(lowest.data(), &first, sizeof first);
    if (auto s = broadcast(lowest, timeout_s); !s) return s.error();
    std::memcpy(&first, lowest.data(), sizeof first);
    return first;
  }

  Status barrier(double timeout_s) override {
    if (auto gathered = gather({}, timeout_s); !gathered) return gathered.error();
    std::vector<char> nothing;
    return broadcast(nothing, timeout_s);
  }

  Status broadcast(std::vector<char> &bytes, double timeout_s) override {
    const double deadline = nowMicroseconds() + timeout_s * 1e6;
    if (rank_ == 0) {
      for (int r = 1; r < size_; ++r)
        if (auto s = sendFrame(socketOf(r), bytes.data(), bytes.size(), deadline, rankName(r)); !s)
          return s;
      return Ok{};
    }
    auto frame = receiveFrame(socketOf(0), deadline, rankName(0));
    if (!frame) return frame.error();
    bytes = std::move(*frame);
    return Ok{};
  }

  Result<std::vector<std::vector<double>>> gather(const std::vector<double> &values,
                                                  double timeout_s) override {
    const double deadline = nowMicroseconds() + timeout_s * 1e6;
    if (rank_ != 0) {
      if (auto s = sendFrame(socketOf(0), values.data(), values.size() * sizeof(double), deadline,
                             rankName(0));
          !s)
        return s.error();
      return std::vector<std::vector<double>>{};
    }
    std::vector<std::vector<double>> all{values};
    for (int r = 1; r < size_; ++r) {
      auto frame = receiveFrame(socketOf(r), deadline, rankName(r));
      if (!frame) return frame.error();
      std::vector<double> row(frame->size() / sizeof(double));
      std::memcpy(row.data(), frame->data(), row.size() * sizeof(double));
      all.push_back(std::move(row));
    }
    return all;
  }

  Status sendTo(int peer, const std::vector<double> &values, double timeout_s) override {
    return sendFrame(socketOf(peer), values.data(), values.size() * sizeof(double),
                     nowMicroseconds() + timeout_s * 1e6, rankName(peer));
  }

  Result<std::vector<double>> receiveFrom(int peer, double timeout_s) override {
    auto frame = receiveFrame(socketOf(peer), nowMicroseconds() + timeout_s * 1e6, rankName(peer));
    if (!frame) return frame.error();
    std::vector<double> values(frame->size() / sizeof(double));
    std::memcpy(values.data(), frame->data(), values.size() * sizeof(double));
    return values;
  }

  [[noreturn]] void abortAll(int exit_code) override {
    // Closing the star makes every other rank's next wait fail at once ("lost the connection").
    closeAll();
    std::fflush(stdout);
    std::_Exit(exit_code);
  }

  void finish() override { closeAll(); }

private:
  // Rank 0 holds one socket per other rank (index r); the others hold one, to rank 0.
  int socketOf(int peer) const {
    return rank_ == 0 ? sockets_[static_cast<std::size_t>(peer)] : sockets_[0];
  }
  void closeAll() {
    for (int &fd : sockets_)
      if (fd >= 0) {
        ::close(fd);
        fd = -1;
      }
  }

  int rank_, size_;
  std::vector<int> sockets_;
};

} // namespace

Result<std::unique_ptr<ControlChannel>> connectTcpChannel(int rank, int world_size,
                                                          const std::string &master_addr, int port,
                                                          double timeout_s) {
  const double deadline = nowMicroseconds() + timeout_s * 1e6;
  const std::string where = master_addr + ":" + std::to_string(port);
  if (rank == 0) {
    const int listener = ::socket(AF_INET6, SOCK_STREAM, 0);
    if (listener < 0) return makeError(systemError("cannot open a socket"));
    const int on = 1, off = 0;
    ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    ::setsockopt(listener, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off); // IPv4 too
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_addr = in6addr_any;
    address.sin6_port = htons(static_cast<std::uint16_t>(port));
    if (::bind(listener, reinterpret_cast<sockaddr *>(&address), sizeof address) != 0 ||
        ::listen(listener, world_size) != 0) {
      const std::string message =
          systemError("rank 0 cannot listen on port " + std::to_string(port) +
                      " (set PIPESCOPE_RENDEZVOUS_PORT to a free port)");
      ::close(listener);
      return makeError(message);
    }
    std::vector<int> sockets(static_cast<std::size_t>(world_size), -1);
    for (int accepted = 1; accepted < world_size;) {
      if (!waitReady(listener, false, deadline)) {
        ::close(listener);
        for (int fd : sockets)
          if (fd >= 0) ::close(fd);
        return makeError("only " + std::to_string(accepted - 1) + " of " +
                         std::to_string(world_size - 1) + " ranks connected to rank 0 on port " +
                         std::to_string(port) + " within " +
                         std::to_string(static_cast<int>(timeout_s)) + " s");
      }
      const int fd = ::accept(listener, nullptr, nullptr);
      if (fd < 0) continue;
      int peer = -1;
      if (!readBytes(fd, &peer, sizeof peer, deadline, "a connecting rank") || peer <= 0 ||
          peer >= world_size || sockets[static_cast<std::size_t>(peer)] >= 0) {
        ::close(fd);
        continue;
      }
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      sockets[static_cast<std::size_t>(peer)] = fd;
      ++accepted;
    }
    ::close(listener);
    return std::unique_ptr<ControlChannel>(new TcpChannel(rank, world_size, std::move(sockets)));
  }
  if (master_addr.empty()) return makeError("MASTER_ADDR is not set; torchrun sets it");
  // Rank 0 may not listen yet: retry until the deadline.
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo *found = nullptr;
    const std::string service = std::to_string(port);
    if (::getaddrinfo(master_addr.c_str(), service.c_str(), &hints, &found) != 0 || !found)
      return makeError("cannot resolve MASTER_ADDR '" + master_addr + "'");
    int fd = -1;
    for (addrinfo *a = found; a && fd < 0; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
      if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
        ::close(fd);
        fd = -1;
      }
    }
    ::freeaddrinfo(found);
    if (fd >= 0) {
      const int on = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      if (auto s = writeBytes(fd, &rank, sizeof rank, deadline, "rank 0 at " + where); !s) {
        ::close(fd);
        return s.error();
      }
      return std::unique_ptr<ControlChannel>(new TcpChannel(rank, world_size, {fd}));
    }
    if (nowMicroseconds() > deadline)
      return makeError("cannot connect to rank 0 at " + where + " within " +
                       std::to_string(static_cast<int>(timeout_s)) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

} // namespace pipescope::backend
