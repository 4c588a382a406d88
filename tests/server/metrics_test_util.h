// Test helpers for metrics: a minimal HTTP GET over a loopback socket, a lookup of one sample
// in the Prometheus text exposition format, and a scrape repeated until the expected samples
// are there (counters a gRPC call moves in OnDone, after its client has seen the status).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

namespace df11::testing {

// GET http://127.0.0.1:port/path (HTTP/1.0, connection closed by the server). Returns the body,
// or nullopt when the connection fails or the status is not 200.
inline std::optional<std::string> HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return std::nullopt;
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (send(fd, request.data(), request.size(), 0) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return std::nullopt;
  }
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) response.append(buffer, n);
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.1 200", 0) != 0 && response.rfind("HTTP/1.0 200", 0) != 0) return std::nullopt;
  if (body == std::string::npos) return std::nullopt;
  return response.substr(body + 4);
}

using Labels = std::map<std::string, std::string>;

// Parses `name{k="v",...} value` (label values without escaped quotes, as our labels are).
inline bool ParseSampleLine(const std::string& line, std::string& name, Labels& labels, double& value) {
  labels.clear();
  const size_t brace = line.find('{');
  const size_t space = line.rfind(' ');
  if (space == std::string::npos) return false;
  size_t name_end = space;
  if (brace != std::string::npos && brace < space) {
    name_end = brace;
    const size_t close = line.rfind('}', space);
    std::string body = line.substr(brace + 1, close - brace - 1);
    size_t pos = 0;
    while (pos < body.size()) {
      const size_t eq = body.find("=\"", pos);
      const size_t quote = body.find('"', eq + 2);
      if (eq == std::string::npos || quote == std::string::npos) return false;
      labels[body.substr(pos, eq - pos)] = body.substr(eq + 2, quote - eq - 2);
      pos = quote + 1;
      if (pos < body.size() && body[pos] == ',') ++pos;
    }
  }
  name = line.substr(0, name_end);
  value = std::strtod(line.c_str() + space + 1, nullptr);
  return true;
}

// The value of the one sample named `name` whose labels include `labels`. nullopt when there is
// none; NaN when several samples match (the test asked an ambiguous question).
inline std::optional<double> SampleValue(const std::string& exposition, const std::string& name,
                                         const Labels& labels = {}) {
  std::istringstream in(exposition);
  std::optional<double> found;
  int matches = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::string sample_name;
    Labels sample_labels;
    double value = 0;
    if (!ParseSampleLine(line, sample_name, sample_labels, value) || sample_name != name) continue;
    bool match = true;
    for (const auto& [k, v] : labels) {
      auto it = sample_labels.find(k);
      if (it == sample_labels.end() || it->second != v) match = false;
    }
    if (match) {
      found = value;
      ++matches;
    }
  }
  if (matches > 1) return std::numeric_limits<double>::quiet_NaN();
  return found;
}

// Scrapes http://127.0.0.1:port/metrics every 20 ms until `done(exposition)` holds or `timeout`
// passes; returns the last exposition either way (the caller's EXPECTs then say what is missing).
inline std::string ScrapeUntil(int port, const std::function<bool(const std::string&)>& done,
                               std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  std::string exposition;
  while (true) {
    exposition = HttpGet(port, "/metrics").value_or("");
    if (done(exposition) || std::chrono::steady_clock::now() >= end) return exposition;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace df11::testing
