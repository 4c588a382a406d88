// HttpServer on libmicrohttpd (see http_server.h).
//
// A response that is not ready when the handler returns is *suspended* in MHD (the connection
// leaves the epoll set); Respond/Write/End from another thread resume it, and MHD then calls the
// access handler (a full response) or the content reader (stream bytes) again on its thread.
// NOTE: MHD_queue_response must run on the connection's MHD thread, so only the access handler
// queues responses; other threads only change the exchange's state and resume the connection.
// Every MHD suspend/resume call happens under the exchange's mutex, so a resume never races a
// suspend, and MHD calls no callback of ours while it holds its own locks.
#include "server/http_server.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdarg>
#include <cstring>
#include <thread>

#include "server/request_log.h"

namespace df11::server {

struct HttpServer::Call {
  HttpServer* server = nullptr;
  HttpRequest request;
  std::shared_ptr<HttpExchange> exchange;
  bool too_large = false;    // the body passed max_body_bytes: 413 once it has been read
  int64_t discarded = 0;     // body bytes dropped after that
  bool dispatched = false;   // the handler has run
};

namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

MHD_Result CollectHeader(void* cls, MHD_ValueKind, const char* key, const char* value) {
  if (key != nullptr) (*static_cast<std::map<std::string, std::string>*>(cls))[Lower(key)] = value ? value : "";
  return MHD_YES;
}

std::string PeerOf(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (info == nullptr || info->client_addr == nullptr) return "";
  char host[NI_MAXHOST], port[NI_MAXSERV];
  const socklen_t len = info->client_addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (getnameinfo(info->client_addr, len, host, sizeof(host), port, sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV) != 0) return "";
  return std::string(host) + ":" + port;
}

HttpResponse PlainError(int status, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = message + "\n";
  return r;
}

MHD_Result QueueFull(MHD_Connection* connection, const HttpResponse& r) {
  MHD_Response* response = MHD_create_response_from_buffer(r.body.size(), const_cast<char*>(r.body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, "Content-Type", r.content_type.c_str());
  for (const auto& [k, v] : r.headers) MHD_add_response_header(response, k.c_str(), v.c_str());
  MHD_Result result = MHD_queue_response(connection, static_cast<unsigned>(r.status), response);
  MHD_destroy_response(response);
  return result;
}

// Listening socket bound to "host:port" (IPv4 or IPv6, names resolved).
StatusOr<int> Listen(const std::string& address) {
  const size_t colon = address.rfind(':');
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return InvalidArgument("'" + address + "': " + gai_strerror(rc));
  }
  std::string error = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
      error = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return Unavailable("cannot listen on '" + address + "': " + error);
  return fd;
}

int PortOf(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return 0;
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

void LogMhd(void*, const char* format, va_list args) {
  char buffer[512];
  std::vsnprintf(buffer, sizeof(buffer), format, args);
  std::string message(buffer);
  while (!message.empty() && message.back() == '\n') message.pop_back();
  LogEvent("warn", "http_server", {{"message", message}});
}

}  // namespace

// The C callbacks MHD calls; all on MHD's threads.
struct HttpServerCallbacks {
  static MHD_Result Access(void* cls, MHD_Connection* connection, const char* url, const char* method, const char*,
                           const char* upload_data, size_t* upload_data_size, void** con_cls) {
    auto* server = static_cast<HttpServer*>(cls);
    auto* call = static_cast<HttpServer::Call*>(*con_cls);
    if (call == nullptr) return Begin(server, connection, url, method, con_cls);
    if (*upload_data_size > 0) {
      const size_t n = *upload_data_size;
      *upload_data_size = 0;
      if (!call->too_large && static_cast<int64_t>(call->request.body.size() + n) > server->limits_.max_body_bytes) {
        call->too_large = true;
        call->request.body.clear();
      }
      if (!call->too_large) {
        call->request.body.append(upload_data, n);
      } else if ((call->discarded += static_cast<int64_t>(n)) > 16 * server->limits_.max_body_bytes) {
        return MHD_NO;  // a client that keeps sending after the limit: close the connection
      }
      return MHD_YES;
    }
    if (call->too_large) return QueueFull(connection, PlainError(413, BodyLimitMessage(server)));
    if (!call->dispatched) {
      call->dispatched = true;
      try {  // a handler bug must cost one request, never the process (this is an MHD thread)
        server->handler_(call->request, call->exchange);
      } catch (const std::exception& e) {
        LogEvent("error", "http_handler_exception", {{"path", call->request.path}, {"error", e.what()}});
        call->exchange->Respond(PlainError(500, std::string("internal error: ") + e.what()));
      }
    }
    return QueueOrSuspend(connection, *call->exchange);
  }

  static MHD_Result Begin(HttpServer* server, MHD_Connection* connection, const char* url, const char* method,
                          void** con_cls) {
    auto* call = new HttpServer::Call();
    *con_cls = call;
    call->server = server;
    call->exchange = std::make_shared<HttpExchange>();
    call->exchange->connection_ = connection;
    call->request.method = method ? method : "";
    call->request.path = url ? url : "";
    call->request.peer = (server->tls_.cert.empty() ? "http:" : "https:") + PeerOf(connection);
    MHD_get_connection_values(connection, MHD_HEADER_KIND, CollectHeader, &call->request.headers);
    {
      std::lock_guard<std::mutex> lock(server->mu_);
      if (server->stopped_) return QueueFull(connection, PlainError(503, "server is stopping"));
      server->open_.insert(call->exchange);
    }
    if (auto length = call->request.Header("content-length")) {
      int64_t value = -1;
      auto [end, ec] = std::from_chars(length->data(), length->data() + length->size(), value);
      if (ec == std::errc() && value > server->limits_.max_body_bytes) {
        call->too_large = true;
        return QueueFull(connection, PlainError(413, BodyLimitMessage(server)));
      }
    }
    return MHD_YES;
  }

  static std::string BodyLimitMessage(const HttpServer* server) {
    return "request body larger than " + std::to_string(server->limits_.max_body_bytes) + " bytes (--max-message-bytes)";
  }

  // On the connection's thread: hands a ready response to MHD, or suspends until there is one.
  static MHD_Result QueueOrSuspend(MHD_Connection* connection, HttpExchange& ex) {
    std::lock_guard<std::mutex> lock(ex.mu_);
    if (ex.aborted_) return MHD_NO;  // closes the connection
    if (ex.queued_) return MHD_YES;
    switch (ex.mode_) {
      case HttpExchange::Mode::kFull:
        ex.queued_ = true;
        return QueueFull(connection, ex.full_);
      case HttpExchange::Mode::kStream:
        ex.queued_ = true;
        return QueueStream(connection, ex);
      case HttpExchange::Mode::kWaiting:
        if (ex.stopping_) {
          ex.queued_ = true;
          return QueueFull(connection, PlainError(503, "server is stopping"));
        }
        ex.suspended_ = true;
        MHD_suspend_connection(connection);
        return MHD_YES;
    }
    return MHD_NO;
  }

  static MHD_Result QueueStream(MHD_Connection* connection, HttpExchange& ex) {
    auto* owner = new std::shared_ptr<HttpExchange>(ex.shared_from_this());
    MHD_Response* response = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, Read, owner, FreeOwner);
    if (response == nullptr) {
      delete owner;
      return MHD_NO;
    }
    MHD_add_response_header(response, "Content-Type", ex.full_.content_type.c_str());
    for (const auto& [k, v] : ex.full_.headers) MHD_add_response_header(response, k.c_str(), v.c_str());
    MHD_Result result = MHD_queue_response(connection, 200, response);
    MHD_destroy_response(response);
    return result;
  }

  // Stream bytes for MHD; suspends the connection while nothing is pending.
  static ssize_t Read(void* cls, uint64_t, char* buf, size_t max) {
    HttpExchange& ex = **static_cast<std::shared_ptr<HttpExchange>*>(cls);
    std::lock_guard<std::mutex> lock(ex.mu_);
    if (ex.aborted_) return MHD_CONTENT_READER_END_WITH_ERROR;
    if (!ex.pending_.empty()) {
      const size_t n = std::min(max, ex.pending_.size());
      std::memcpy(buf, ex.pending_.data(), n);
      ex.pending_.erase(0, n);
      return static_cast<ssize_t>(n);
    }
    if (ex.ended_) return MHD_CONTENT_READER_END_OF_STREAM;
    if (ex.stopping_ || ex.aborted_ || ex.closed_ || ex.connection_ == nullptr) return MHD_CONTENT_READER_END_WITH_ERROR;
    ex.suspended_ = true;
    MHD_suspend_connection(ex.connection_);
    return 0;
  }

  static void FreeOwner(void* cls) { delete static_cast<std::shared_ptr<HttpExchange>*>(cls); }

  static void Completed(void*, MHD_Connection*, void** con_cls, MHD_RequestTerminationCode toe) {
    auto* call = static_cast<HttpServer::Call*>(*con_cls);
    if (call == nullptr) return;
    *con_cls = nullptr;
    HttpExchange& ex = *call->exchange;
    std::function<void(bool)> on_close;
    bool complete;
    {
      std::lock_guard<std::mutex> lock(ex.mu_);
      ex.closed_ = true;
      ex.connection_ = nullptr;
      ex.suspended_ = false;
      complete = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && ex.queued_ &&
                 (ex.mode_ == HttpExchange::Mode::kFull || (ex.ended_ && ex.pending_.empty()));
      on_close = std::move(ex.on_close_);
    }
    if (on_close) on_close(complete);
    {
      std::lock_guard<std::mutex> lock(call->server->mu_);
      call->server->open_.erase(call->exchange);
    }
    delete call;
  }
};

std::optional<std::string> HttpRequest::Header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  if (it == headers.end()) return std::nullopt;
  return it->second;
}

void HttpExchange::WakeLocked() {
  if (suspended_ && connection_ != nullptr) {
    suspended_ = false;
    MHD_resume_connection(connection_);
  }
}

void HttpExchange::Respond(HttpResponse response) {
  std::lock_guard<std::mutex> lock(mu_);
  if (mode_ != Mode::kWaiting || closed_) return;
  full_ = std::move(response);
  mode_ = Mode::kFull;
  WakeLocked();
}

void HttpExchange::StartStream(std::string content_type, std::vector<std::pair<std::string, std::string>> headers) {
  std::lock_guard<std::mutex> lock(mu_);
  if (mode_ != Mode::kWaiting || closed_) return;
  full_.content_type = std::move(content_type);
  full_.headers = std::move(headers);
  mode_ = Mode::kStream;
  WakeLocked();
}

void HttpExchange::Write(std::string_view bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (mode_ != Mode::kStream || ended_ || closed_) return;
  pending_.append(bytes);
  WakeLocked();
}

void HttpExchange::End() {
  std::lock_guard<std::mutex> lock(mu_);
  if (mode_ != Mode::kStream || closed_) return;
  ended_ = true;
  WakeLocked();
}

void HttpExchange::OnClose(std::function<void(bool)> callback) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!closed_) {
      on_close_ = std::move(callback);
      return;
    }
  }
  callback(false);
}

void HttpExchange::Abort() {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
  WakeLocked();
}

bool HttpExchange::ClientGone() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return true;
  // The descriptor is ours to poll only while MHD holds the connection suspended.
  if (!suspended_ || connection_ == nullptr) return false;
  const int64_t now = NowNs();
  if (now - last_gone_check_ns_ < 100'000'000) return false;
  last_gone_check_ns_ = now;
  const MHD_ConnectionInfo* info = MHD_get_connection_info(connection_, MHD_CONNECTION_INFO_CONNECTION_FD);
  if (info == nullptr) return false;
  pollfd p{info->connect_fd, POLLRDHUP, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

Status ValidateHostPort(const std::string& address, const std::string& what) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) return InvalidArgument(what + " '" + address + "': expected host:port");
  const std::string port = address.substr(colon + 1);
  int value = -1;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value < 0 || value > 65535) {
    return InvalidArgument(what + " '" + address + "': port '" + port + "' is not in 0..65535");
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& address, const HttpLimits& limits,
                                                       const HttpTls& tls, HttpHandler handler) {
  DF11_RETURN_IF_ERROR(ValidateHostPort(address, "HTTP address"));
  if (tls.cert.empty() != tls.key.empty()) return InvalidArgument("HTTP TLS needs both a certificate and a key");
  std::unique_ptr<HttpServer> s(new HttpServer());
  s->limits_ = limits;
  s->tls_ = tls;
  s->handler_ = std::move(handler);
  DF11_ASSIGN_OR_RETURN(s->listen_fd_, Listen(address));
  s->port_ = PortOf(s->listen_fd_);
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
  if (!tls.cert.empty()) flags |= MHD_USE_TLS;
  std::vector<MHD_OptionItem> options = {
      {MHD_OPTION_EXTERNAL_LOGGER, reinterpret_cast<intptr_t>(&LogMhd), nullptr},  // first: covers the rest
      {MHD_OPTION_LISTEN_SOCKET, s->listen_fd_, nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, static_cast<intptr_t>(std::max(1.0, limits.idle_timeout_seconds)), nullptr},
      {MHD_OPTION_PER_IP_CONNECTION_LIMIT, limits.max_connections_per_client, nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, limits.max_connections, nullptr},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&HttpServerCallbacks::Completed), nullptr},
  };
  if (limits.threads > 1) options.push_back({MHD_OPTION_THREAD_POOL_SIZE, limits.threads, nullptr});
  if (!tls.cert.empty()) {
    options.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(s->tls_.key.c_str())});
    options.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(s->tls_.cert.c_str())});
  }
  options.push_back({MHD_OPTION_END, 0, nullptr});
  s->daemon_ = MHD_start_daemon(flags, 0, nullptr, nullptr, &HttpServerCallbacks::Access, s.get(), MHD_OPTION_ARRAY,
                                options.data(), MHD_OPTION_END);
  if (s->daemon_ == nullptr) {
    close(s->listen_fd_);
    s->listen_fd_ = -1;
    return InvalidArgument("cannot start the HTTP server on '" + address + "'" +
                           (tls.cert.empty() ? "" : " (check the TLS certificate and key)"));
  }
  return s;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  std::set<std::shared_ptr<HttpExchange>> open;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_ || daemon_ == nullptr) return;
    stopped_ = true;
    open = open_;
  }
  MHD_quiesce_daemon(daemon_);
  for (const auto& ex : open) {
    std::lock_guard<std::mutex> lock(ex->mu_);
    ex->stopping_ = true;
    ex->WakeLocked();
  }
  // MHD must not be stopped with suspended connections: let the woken exchanges end first.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (open_.empty()) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
  if (listen_fd_ >= 0) close(listen_fd_);
  listen_fd_ = -1;
}

}  // namespace df11::server
