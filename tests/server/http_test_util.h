// A minimal HTTP/1.1 client for the daemon tests (loopback, plain HTTP, blocking sockets):
//   - Http(port, method, path, body, headers): one request on a fresh connection, the chunked
//     body decoded;
//   - SseEvents(body): the `data:` payloads of a server-sent-events body, in order;
//   - ConnectLoopback / SendAll / RecvSome for tests that hold connections open or cut them.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

namespace df11::test {

inline int ConnectLoopback(int port, double timeout_seconds = 60) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{static_cast<time_t>(timeout_seconds), static_cast<suseconds_t>((timeout_seconds - static_cast<time_t>(timeout_seconds)) * 1e6)};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

inline bool SendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Appends what arrives (up to 64 KiB); false on EOF, error or timeout.
inline bool RecvSome(int fd, std::string* out) {
  char buffer[65536];
  ssize_t n = ::recv(fd, buffer, sizeof(buffer), 0);
  if (n <= 0) return false;
  out->append(buffer, static_cast<size_t>(n));
  return true;
}

inline std::string RequestText(const std::string& method, const std::string& path, const std::string& body,
                               const std::map<std::string, std::string>& headers = {}) {
  std::string text = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  if (!body.empty() || method == "POST") text += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  for (const auto& [k, v] : headers) text += k + ": " + v + "\r\n";
  return text + "\r\n" + body;
}

struct HttpResult {
  int status = 0;  // 0: no response
  std::map<std::string, std::string> headers;  // names lower case
  std::string body;
};

// Decodes a chunked body ("<hex>\r\n<data>\r\n ... 0\r\n\r\n").
inline std::string Dechunk(const std::string& raw) {
  std::string out;
  size_t pos = 0;
  while (pos < raw.size()) {
    size_t eol = raw.find("\r\n", pos);
    if (eol == std::string::npos) break;
    size_t size = std::stoul(raw.substr(pos, eol - pos), nullptr, 16);
    if (size == 0) break;
    out += raw.substr(eol + 2, size);
    pos = eol + 2 + size + 2;
  }
  return out;
}

inline HttpResult ParseResponse(const std::string& raw) {
  HttpResult r;
  size_t head_end = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos) return r;
  r.status = std::stoi(raw.substr(9, 3));
  size_t line = raw.find("\r\n") + 2;
  while (line < head_end) {
    size_t eol = raw.find("\r\n", line);
    std::string h = raw.substr(line, eol - line);
    size_t colon = h.find(':');
    std::string name = h.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = h.substr(h.find_first_not_of(' ', colon + 1));
    line = eol + 2;
  }
  r.body = raw.substr(head_end + 4);
  if (r.headers["transfer-encoding"] == "chunked") r.body = Dechunk(r.body);
  return r;
}

inline HttpResult Http(int port, const std::string& method, const std::string& path, const std::string& body = "",
                       const std::map<std::string, std::string>& headers = {}) {
  int fd = ConnectLoopback(port);
  if (fd < 0) return {};
  std::string raw;
  if (SendAll(fd, RequestText(method, path, body, headers))) {
    while (RecvSome(fd, &raw)) {
    }
  }
  ::close(fd);
  return ParseResponse(raw);
}

inline std::vector<std::string> SseEvents(const std::string& body) {
  std::vector<std::string> events;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    size_t end = body.find("\n\n", pos);
    events.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end == std::string::npos ? body.size() : end + 2;
  }
  return events;
}

}  // namespace df11::test
