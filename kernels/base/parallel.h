// ParallelFor: split [0, n) into contiguous ranges run on up to `threads` std::threads.
// Blocking; the calling thread takes one range. `fn(begin, end, worker)` must be thread-safe.
// When the system refuses a thread (std::system_error: thread or memory-map limits), the calling
// thread runs that range itself: slower, never an exception out of here for lack of threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <system_error>
#include <thread>
#include <vector>

namespace df11 {

// Number of hardware threads (at least 1).
inline int HardwareThreads() { return std::max(1u, std::thread::hardware_concurrency()); }

inline void ParallelFor(int64_t n, int threads, const std::function<void(int64_t, int64_t, int)>& fn) {
  if (n <= 0) return;
  if (threads <= 0) threads = HardwareThreads();
  const int64_t workers = std::min<int64_t>(threads, n);
  if (workers == 1) {
    fn(0, n, 0);
    return;
  }
  auto range = [&](int64_t w) { fn(n * w / workers, n * (w + 1) / workers, static_cast<int>(w)); };
  std::vector<std::thread> pool;
  std::vector<int64_t> inline_ranges;
  pool.reserve(workers - 1);
  for (int64_t w = 1; w < workers; ++w) {
    try {
      pool.emplace_back(range, w);
    } catch (const std::system_error&) {
      inline_ranges.push_back(w);
    }
  }
  range(0);
  for (int64_t w : inline_ranges) range(w);
  for (auto& t : pool) t.join();
}

}  // namespace df11
