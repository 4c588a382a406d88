// Bounded single-worker job queue (see work_queue.h).
#include "server/work_queue.h"

#include <system_error>

namespace df11::server {

WorkQueue::WorkQueue(size_t max_queued) : max_queued_(max_queued < 1 ? 1 : max_queued) {
  try {
    worker_ = std::thread([this] { Run(); });
  } catch (const std::system_error&) {
    // worker_ stays empty: TryPost answers UNAVAILABLE
  }
}

WorkQueue::~WorkQueue() {
  std::deque<Job> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    left.swap(jobs_);
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
  for (Job& job : left) job(false);
}

Status WorkQueue::TryPost(Job job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_ || !worker_.joinable())
      return Unavailable("the server is shutting down or cannot start its admin worker");
    if (jobs_.size() >= max_queued_) {
      return ResourceExhausted(std::to_string(jobs_.size()) + " admin operations are already waiting; retry later");
    }
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
  return Status::Ok();
}

void WorkQueue::Run() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (stop_) return;  // the destructor cancels what is left
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job(true);
  }
}

}  // namespace df11::server
