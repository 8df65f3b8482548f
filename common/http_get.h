// A plain HTTP/1.0 GET on loopback and a Prometheus sample lookup: for reading a server's
// /metrics from tests and from bloom-bench, without an HTTP library.
//
// Thread-safety: the functions are thread-safe.
#ifndef COMMON_HTTP_GET_H_
#define COMMON_HTTP_GET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace bloomhttp {

// GET http://127.0.0.1:<port><path> with HTTP/1.0; returns the whole response (status line,
// headers, body), or "" if the connection failed; what arrived if nothing came for 20 s.
inline std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  const timeval timeout{.tv_sec = 20, .tv_usec = 0};  // a caller must not hang on a stuck server
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buffer[4096];
      ssize_t n;
      while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
    }
  }
  close(fd);
  return response;
}

// The value of the sample `series` (metric name plus labels exactly as exposed, e.g.
// `bloom_rpc_requests_total{code="OK",method="Add"}`) in Prometheus text, or -1 if absent.
inline double PrometheusSample(const std::string& text, const std::string& series) {
  size_t at = 0;
  while ((at = text.find(series + " ", at)) != std::string::npos) {
    if (at == 0 || text[at - 1] == '\n') {
      return std::strtod(text.c_str() + at + series.size(), nullptr);
    }
    at += series.size();
  }
  return -1;
}

}  // namespace bloomhttp

#endif  // COMMON_HTTP_GET_H_
