// Keeps civetweb (prometheus::Exposer's HTTP server) able to start threads in CUDA builds.
//
// NOTE: Debian's civetweb creates its threads with a fixed 100 KiB stack
// (pthread_attr_setstacksize). glibc places the static TLS of every library loaded at startup
// inside each thread's stack, and libcublasLt alone has 92 KiB of it, so pthread_create fails
// with EINVAL and Exposer throws "null context when constructing CivetServer". This definition
// interposes pthread_attr_setstacksize for the whole process and raises requests below 1 MiB to
// 1 MiB (larger requests pass unchanged); tests/server/metrics_test.cc fails without it in CUDA
// builds.
#include <dlfcn.h>
#include <pthread.h>

#include <cstddef>

namespace {
constexpr size_t kMinThreadStackBytes = size_t{1} << 20;
using SetStackSize = int (*)(pthread_attr_t*, size_t);
}  // namespace

extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size) {
  static const SetStackSize next = reinterpret_cast<SetStackSize>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  return next(attr, size < kMinThreadStackBytes ? kMinThreadStackBytes : size);
}

namespace df11 {
// Referenced by Metrics::Start so that the linker keeps this object (and the definition above).
void KeepThreadStackFloor() {}
}  // namespace df11
