// HttpServer: df11d's event-driven HTTP/1.1 listener (libmicrohttpd), shared by /metrics and the
// OpenAI-compatible API (server/openai_api.h). Chosen over civetweb / cpp-httplib (a thread per
// connection) and Boost.Beast (timeouts, limits and TLS written by hand): docs/api.md, "HTTP".
//
// Threads: `threads` epoll threads (MHD's internal thread pool) read requests and write
// responses; no thread per connection, so idle or slow clients cost a file descriptor, not a
// worker. Limits: a request that sends nothing for `idle_timeout_seconds` is closed (the
// request-read timeout; a connection waiting on a suspended response does not time out); at most
// `max_connections_per_client` connections per client IP and `max_connections` in all; bodies
// over `max_body_bytes` get 413 as soon as the length is known.
//
// Handlers run on an HTTP thread and must not block: they either Respond() at once or keep the
// HttpExchange and complete it later from any thread (Respond, or StartStream + Write + End).
// Thread-safety: HttpExchange is thread-safe; HttpServer's methods may be called from any thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernels/base/status.h"

struct MHD_Daemon;
struct MHD_Connection;

namespace df11::server {

struct HttpLimits {
  double idle_timeout_seconds = 10;    // request-read / keep-alive idle timeout; >= 1
  int max_connections_per_client = 64;  // per client IP
  int max_connections = 1000;           // all clients
  int64_t max_body_bytes = 4 << 20;
  int threads = 2;                      // epoll threads
};

struct HttpTls {  // PEM text; both empty = plain HTTP
  std::string cert, key;
};

struct HttpRequest {
  std::string method, path;  // path without the query string
  std::map<std::string, std::string> headers;  // names lower case
  std::string body;
  std::string peer;  // "http:ip:port" or "https:ip:port" (as gRPC's "ipv4:ip:port")
  std::optional<std::string> Header(const std::string& lower_name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

// One request whose response may come later, from any thread. Exactly one of Respond or
// StartStream takes effect; calls after that (or after the client left) are ignored.
class HttpExchange : public std::enable_shared_from_this<HttpExchange> {
 public:
  void Respond(HttpResponse response);
  // A 200 response with unknown length (chunked): Write() appends body bytes, End() finishes.
  void StartStream(std::string content_type, std::vector<std::pair<std::string, std::string>> headers);
  void Write(std::string_view bytes);
  void End();
  // Runs once on an HTTP thread when the exchange ends: `complete` is false when the client went
  // away, the connection timed out or the server stopped before the response was fully sent.
  void OnClose(std::function<void(bool complete)> callback);
  // True when the client has closed its side of the connection (checked without blocking, at most
  // every 100 ms while the response waits; false when unknown). Any thread.
  bool ClientGone();
  // Closes the connection without completing the response (e.g. after ClientGone). Any thread.
  void Abort();

 private:
  friend class HttpServer;
  friend struct HttpServerCallbacks;
  enum class Mode { kWaiting, kFull, kStream };
  void WakeLocked();  // resumes a suspended connection; caller holds mu_

  std::mutex mu_;
  MHD_Connection* connection_ = nullptr;  // valid until closed_
  bool suspended_ = false;
  bool queued_ = false;   // the response was handed to MHD
  bool closed_ = false;
  bool stopping_ = false;
  bool aborted_ = false;
  Mode mode_ = Mode::kWaiting;
  HttpResponse full_;
  std::string pending_;  // stream bytes not yet handed to MHD
  bool ended_ = false;
  int64_t last_gone_check_ns_ = 0;
  std::function<void(bool)> on_close_;
};

using HttpHandler = std::function<void(const HttpRequest&, const std::shared_ptr<HttpExchange>&)>;

class HttpServer {
 public:
  // Listens on "host:port" (port 0 picks one). INVALID_ARGUMENT for a malformed address or TLS
  // material, UNAVAILABLE when the address cannot be bound. `handler` answers every request.
  static StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& address, const HttpLimits& limits,
                                                     const HttpTls& tls, HttpHandler handler);
  ~HttpServer();  // Stop()
  // Stops accepting, ends every open exchange (streams end, waiting ones get 503), closes.
  void Stop();
  int port() const { return port_; }

  // MHD callbacks (http_server.cc); public for the C trampolines only.
  struct Call;

 private:
  HttpServer() = default;
  friend struct HttpServerCallbacks;

  HttpLimits limits_;
  HttpHandler handler_;
  HttpTls tls_;
  MHD_Daemon* daemon_ = nullptr;
  int listen_fd_ = -1;
  int port_ = 0;
  std::mutex mu_;
  std::set<std::shared_ptr<HttpExchange>> open_;  // exchanges not yet closed
  bool stopped_ = false;
};

// "host:port" with a non-empty host and a port in [0, 65535]; `what` names the flag in errors.
Status ValidateHostPort(const std::string& address, const std::string& what);

}  // namespace df11::server
