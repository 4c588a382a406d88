// `df11 generate`: streams a completion from df11d to stdout (raw prompt, --chat, or --tokens),
// with every sampling parameter of the API; --stats prints usage and timings to stderr.
#include <cstdio>
#include <sstream>

#include "cli/cmd_client.h"
#include "proto/df11.grpc.pb.h"

namespace df11::cli {
namespace {

namespace pb = ::df11::v1;

struct GenerateFlags {
  ClientOptions client;
  std::string model, prompt, system, tokens, template_vars, request_id;
  bool chat = false, ignore_eos = false, stats = false, show_ids = false, keep_special = false;
  int64_t max_tokens = 256;
  std::optional<float> temperature, top_p, min_p, repetition_penalty, presence_penalty, frequency_penalty;
  std::optional<int64_t> top_k;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  int32_t top_logprobs = 0, priority = 0;
};

std::vector<int32_t> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < INT32_MIN || v > INT32_MAX) throw std::out_of_range(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      throw CommandFailed(2, "--tokens: expected comma-separated integers, got '" + item + "'");
    }
  }
  return ids;
}

pb::GenerateRequest BuildRequest(const GenerateFlags& f) {
  pb::GenerateRequest r;
  r.set_model(f.model);
  if (!f.tokens.empty()) {
    for (int32_t id : ParseIds(f.tokens)) r.mutable_tokens()->add_ids(id);
  } else if (f.chat) {
    auto* chat = r.mutable_chat();
    if (!f.system.empty()) {
      auto* m = chat->add_messages();
      m->set_role("system");
      m->set_content(f.system);
    }
    auto* m = chat->add_messages();
    m->set_role("user");
    m->set_content(f.prompt);
    chat->set_template_vars_json(f.template_vars);
  } else {
    r.set_text(f.prompt);
  }
  auto* s = r.mutable_sampling();
  if (f.temperature) s->set_temperature(*f.temperature);
  if (f.top_p) s->set_top_p(*f.top_p);
  if (f.top_k) s->set_top_k(*f.top_k);
  if (f.min_p) s->set_min_p(*f.min_p);
  if (f.repetition_penalty) s->set_repetition_penalty(*f.repetition_penalty);
  if (f.presence_penalty) s->set_presence_penalty(*f.presence_penalty);
  if (f.frequency_penalty) s->set_frequency_penalty(*f.frequency_penalty);
  if (f.seed) s->set_seed(*f.seed);
  r.set_max_tokens(f.max_tokens);
  for (const auto& stop : f.stop) r.add_stop(stop);
  for (int32_t id : f.stop_token_ids) r.add_stop_token_ids(id);
  r.set_ignore_eos(f.ignore_eos);
  r.set_top_logprobs(f.top_logprobs);
  r.set_priority(f.priority);
  r.set_request_id(f.request_id);
  if (f.keep_special) r.set_skip_special_tokens(false);
  return r;
}

void Run(const GenerateFlags& f) {
  if (f.prompt.empty() && f.tokens.empty()) throw CommandFailed(2, "give a PROMPT or --tokens");
  auto stub = pb::Generation::NewStub(MakeChannel(f.client));
  grpc::ClientContext ctx;
  PrepareContext(ctx, f.client);
  auto reader = stub->Generate(&ctx, BuildRequest(f));
  pb::GenerateResponse msg, last;
  while (reader->Read(&msg)) {
    std::fwrite(msg.text().data(), 1, msg.text().size(), stdout);
    if (f.show_ids) {
      for (int32_t id : msg.token_ids()) std::fprintf(stderr, "[%d]", id);
    }
    std::fflush(stdout);
    last = msg;
  }
  grpc::Status status = reader->Finish();
  std::printf("\n");
  CheckRpc(status, "Generate");
  if (f.stats) {
    std::fprintf(stderr, "finish=%s prompt_tokens=%lld completion_tokens=%lld queue_s=%.4f ttft_s=%.4f total_s=%.4f\n",
                 pb::FinishReason_Name(last.finish_reason()).c_str(),
                 static_cast<long long>(last.usage().prompt_tokens()),
                 static_cast<long long>(last.usage().completion_tokens()), last.timings().queue_seconds(),
                 last.timings().first_token_seconds(), last.timings().total_seconds());
  }
}

void Register(CLI::App& app) {
  auto f = std::make_shared<GenerateFlags>();
  auto* g = app.add_subcommand("generate", "Stream a completion from a running df11d");
  AddClientOptions(g, f->client);
  g->add_option("PROMPT", f->prompt, "prompt text (the user message with --chat)");
  g->add_option("--model,-m", f->model, "served model name (df11 models)")->required();
  g->add_flag("--chat", f->chat, "send PROMPT as a chat user message (the model's chat template applies)");
  g->add_option("--system", f->system, "system message (with --chat)");
  g->add_option("--template-vars", f->template_vars, "chat template variables as a JSON object (with --chat)");
  g->add_option("--tokens", f->tokens, "prompt token ids, comma separated (instead of PROMPT)");
  g->add_option("--max-tokens,-n", f->max_tokens, "tokens to generate at most")->capture_default_str();
  g->add_option("--temperature,-t", f->temperature, "0 = greedy (server default 1.0)");
  g->add_option("--top-p", f->top_p, "nucleus mass in (0, 1]");
  g->add_option("--top-k", f->top_k, "keep the k most likely tokens (0 = all)");
  g->add_option("--min-p", f->min_p, "drop tokens below min_p * p_max");
  g->add_option("--repetition-penalty", f->repetition_penalty, "HF-style penalty (> 0, 1 = off)");
  g->add_option("--presence-penalty", f->presence_penalty, "OpenAI-style, [-2, 2]");
  g->add_option("--frequency-penalty", f->frequency_penalty, "OpenAI-style, [-2, 2]");
  g->add_option("--seed", f->seed, "sampling seed");
  g->add_option("--stop", f->stop, "stop string (repeatable)");
  g->add_option("--stop-token-id", f->stop_token_ids, "stop token id (repeatable)");
  g->add_flag("--ignore-eos", f->ignore_eos, "keep going past end-of-sequence tokens");
  g->add_option("--top-logprobs", f->top_logprobs, "alternatives per token to request (0-20)");
  g->add_option("--priority", f->priority, "higher runs first among waiting requests");
  g->add_option("--request-id", f->request_id, "client request id (echoed in server logs)");
  g->add_flag("--keep-special", f->keep_special, "do not skip special tokens in the text");
  g->add_flag("--show-ids", f->show_ids, "print token ids to stderr as they arrive");
  g->add_flag("--stats", f->stats, "print usage and timings to stderr at the end");
  g->callback([f] { Run(*f); });
}
DF11_REGISTER_COMMAND(Register);

}  // namespace
}  // namespace df11::cli
