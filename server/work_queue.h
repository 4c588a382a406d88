// WorkQueue: one worker thread and a bounded FIFO of jobs, for work that must not run on gRPC's
// threads (Admin model loads and unloads). A full queue refuses the job instead of growing, so a
// flood of calls costs a bounded number of threads (one) and a bounded amount of memory.
// Every accepted job runs exactly once: job(true) on the worker, or job(false) on the destroying
// thread for jobs still queued at destruction (so each can finish its call as cancelled).
// Thread-safety: TryPost may be called from any thread; the destructor joins the worker.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "kernels/base/status.h"

namespace df11::server {

class WorkQueue {
 public:
  using Job = std::function<void(bool run)>;
  // Starts the worker. `max_queued` >= 1 jobs may wait behind the running one.
  explicit WorkQueue(size_t max_queued);
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // RESOURCE_EXHAUSTED when `max_queued` jobs are already waiting (then `job` is dropped unrun),
  // UNAVAILABLE after shutdown began or when the worker thread could not be started.
  Status TryPost(Job job);

 private:
  void Run();
  const size_t max_queued_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  bool stop_ = false;
  std::thread worker_;  // not joinable when it could not be started
};

}  // namespace df11::server
