// TcpProxy (tcp_proxy.h): the relay, its cuts and heals.
#include "tests/support/tcp_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace bloomtest {
namespace {

constexpr int kPollMillis = 20;

int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t sent = send(fd, data, size, MSG_NOSIGNAL);
    if (sent < 0 && errno == EINTR) continue;
    if (sent <= 0) return false;
    data += sent;
    size -= static_cast<size_t>(sent);
  }
  return true;
}

}  // namespace

std::unique_ptr<TcpProxy> TcpProxy::Start(int upstream_port) {
  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) return nullptr;
  const int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      listen(listener, 128) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(listener);
    return nullptr;
  }
  auto proxy =
      std::unique_ptr<TcpProxy>(new TcpProxy(listener, ntohs(address.sin_port), upstream_port));
  proxy->acceptor_ = std::thread([raw = proxy.get()] { raw->AcceptLoop(); });
  return proxy;
}

TcpProxy::~TcpProxy() {
  stopping_.store(true);
  acceptor_.join();
  close(listener_);
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::shared_ptr<Connection>& connection : connections_) CloseConnection(*connection);
}

void TcpProxy::Cut() { cut_.store(true); }

void TcpProxy::Heal() {
  std::lock_guard<std::mutex> lock(mu_);
  generation_.fetch_add(1);  // the relays of the connections held across the cut end
  for (const std::shared_ptr<Connection>& connection : connections_) CloseConnection(*connection);
  connections_.clear();
  cut_.store(false);
}

void TcpProxy::CloseConnection(Connection& connection) {
  if (connection.client >= 0) shutdown(connection.client, SHUT_RDWR);
  if (connection.upstream >= 0) shutdown(connection.upstream, SHUT_RDWR);
  if (connection.to_upstream.joinable()) connection.to_upstream.join();
  if (connection.to_client.joinable()) connection.to_client.join();
  if (connection.client >= 0) close(connection.client);
  if (connection.upstream >= 0) close(connection.upstream);
  connection.client = connection.upstream = -1;
}

void TcpProxy::AcceptLoop() {
  while (!stopping_.load()) {
    pollfd ready{listener_, POLLIN, 0};
    if (poll(&ready, 1, kPollMillis) <= 0) continue;
    const int client = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    auto connection = std::make_shared<Connection>();
    connection->client = client;
    std::lock_guard<std::mutex> lock(mu_);
    connection->generation = generation_.load();
    if (!cut_.load()) {  // during a cut it is held: accepted, never relayed
      connection->upstream = ConnectLoopback(upstream_port_);
      if (connection->upstream < 0) {
        close(client);
        continue;
      }
      connection->to_upstream = std::thread([this, connection] { Relay(connection, true); });
      connection->to_client = std::thread([this, connection] { Relay(connection, false); });
    }
    connections_.push_back(std::move(connection));
  }
}

void TcpProxy::Relay(const std::shared_ptr<Connection>& connection, bool to_upstream) {
  const int from = to_upstream ? connection->client : connection->upstream;
  const int to = to_upstream ? connection->upstream : connection->client;
  char buffer[64 << 10];
  while (!stopping_.load() && connection->generation == generation_.load()) {
    if (cut_.load()) {  // a black hole: nothing is read, so nothing passes
      usleep(kPollMillis * 1000);
      continue;
    }
    pollfd ready{from, POLLIN, 0};
    if (poll(&ready, 1, kPollMillis) <= 0) continue;
    const ssize_t got = recv(from, buffer, sizeof(buffer), 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    // Cut meanwhile: held until the heal, which ends this connection.
    while (cut_.load() && !stopping_.load() && connection->generation == generation_.load()) {
      usleep(kPollMillis * 1000);
    }
    if (connection->generation != generation_.load() ||
        !SendAll(to, buffer, static_cast<size_t>(got))) {
      break;
    }
  }
  // One side closed (or the link was healed over it): the other learns it as over a real link.
  shutdown(from, SHUT_RDWR);
  shutdown(to, SHUT_RDWR);
}

}  // namespace bloomtest
