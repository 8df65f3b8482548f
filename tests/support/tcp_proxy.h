// TcpProxy: a TCP relay on loopback that a test can cut and heal, to partition real processes
// from one another (tests/partition_test.cc). Every connection to the proxy's port is relayed
// to the upstream port. Cut() makes the link a black hole, as a partitioned network is: no byte
// passes either way and new connections are accepted but never relayed, so the peers learn of it
// only from their own timeouts (gRPC keepalives, etcd's call deadlines), not from a reset.
// Heal() lets bytes pass again: the connections held across the cut are closed (their peers
// reconnect), new ones are relayed.
//
//   std::unique_ptr<TcpProxy> proxy = TcpProxy::Start(server_port);
//   ... clients dial 127.0.0.1:proxy->port() ...
//   proxy->Cut();  ...  proxy->Heal();
//
// Thread-safety: thread-safe. A thread per direction of each connection, and one accepting.
#ifndef TESTS_SUPPORT_TCP_PROXY_H_
#define TESTS_SUPPORT_TCP_PROXY_H_

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace bloomtest {

class TcpProxy {
 public:
  // Listens on a free loopback port; nullptr if it cannot.
  static std::unique_ptr<TcpProxy> Start(int upstream_port);
  ~TcpProxy();  // closes every connection and joins its threads
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  int port() const { return port_; }
  void Cut();
  void Heal();

 private:
  struct Connection {
    int client = -1;
    int upstream = -1;   // -1 while held (accepted during a cut)
    int generation = 0;  // the cut generation it was relayed in
    std::thread to_upstream;
    std::thread to_client;
  };

  TcpProxy(int listener, int port, int upstream_port)
      : listener_(listener), port_(port), upstream_port_(upstream_port) {}
  void AcceptLoop();
  // Copies `from` to `to` while the link is up and `connection` belongs to the current
  // generation; holds (reads nothing) while cut.
  void Relay(const std::shared_ptr<Connection>& connection, bool to_upstream);
  void CloseConnection(Connection& connection);

  const int listener_;
  const int port_;
  const int upstream_port_;
  std::atomic<bool> cut_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<int> generation_{0};  // grows at each Heal: connections of older ones close
  std::mutex mu_;
  std::vector<std::shared_ptr<Connection>> connections_;  // guarded by mu_
  std::thread acceptor_;
};

}  // namespace bloomtest

#endif  // TESTS_SUPPORT_TCP_PROXY_H_
