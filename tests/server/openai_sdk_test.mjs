// The official OpenAI Node SDK against df11d's HTTP API (driven by openai_sdk_test.sh):
// lists models, streams a chat completion and a completion, gets the error objects of a bad
// request and of an unknown model, and cancels a stream mid-way (its KV blocks are freed).
// Env: DF11_OPENAI_SDK_DIR (node_modules/openai inside), BASE_URL (http://host:port/v1),
// METRICS_URL, MODEL, PROMPT, MAX_TOKENS, EXPECTED (the gRPC Generate text of the same greedy request).
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(process.env.DF11_OPENAI_SDK_DIR + '/package.json');
const OpenAI = require('openai');
const client = new OpenAI({ baseURL: process.env.BASE_URL, apiKey: 'unused', maxRetries: 0 });
const model = process.env.MODEL;
const maxTokens = Number(process.env.MAX_TOKENS);

async function kvBlocksUsed() {
  const text = await (await fetch(process.env.METRICS_URL)).text();
  const line = text.split('\n').find((l) => l.startsWith(`df11_kv_cache_blocks_used{model="${model}"}`));
  return Number(line.split(' ').pop());
}

async function expectError(promise, status, check) {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof OpenAI.APIError, `not an APIError: ${err}`);
    assert.equal(err.status, status, err.message);
    check(err);
    return;
  }
  assert.fail(`expected HTTP ${status}`);
}

const models = await client.models.list();
assert.ok(models.data.some((m) => m.id === model), JSON.stringify(models.data));
console.log('models:', models.data.map((m) => m.id).join(', '));

const chat = await client.chat.completions.create({
  model, messages: [{ role: 'user', content: 'Write a function' }], max_tokens: 16, temperature: 0,
  stream: true, stream_options: { include_usage: true },
});
let chatText = '', chatFinish = null, chatUsage = null, roles = 0;
for await (const chunk of chat) {
  if (chunk.usage) chatUsage = chunk.usage;
  for (const choice of chunk.choices) {
    if (choice.delta.role) roles++;
    chatText += choice.delta.content ?? '';
    chatFinish = choice.finish_reason ?? chatFinish;
  }
}
assert.equal(roles, 1);
assert.ok(['stop', 'length'].includes(chatFinish), String(chatFinish));
assert.ok(chatUsage && chatUsage.completion_tokens > 0, JSON.stringify(chatUsage));
console.log('chat stream:', JSON.stringify(chatText));

const completion = await client.completions.create({
  model, prompt: process.env.PROMPT, max_tokens: maxTokens, temperature: 0, stream: true,
});
let text = '';
for await (const chunk of completion) text += chunk.choices[0]?.text ?? '';
assert.equal(text, process.env.EXPECTED, 'streamed completion differs from gRPC Generate');
const whole = await client.completions.create({ model, prompt: process.env.PROMPT, max_tokens: maxTokens, temperature: 0 });
assert.equal(whole.choices[0].text, process.env.EXPECTED, 'completion differs from gRPC Generate');
console.log('completion equals gRPC Generate:', JSON.stringify(text));

await expectError(client.completions.create({ model, prompt: 'x', top_p: 2 }), 400, (err) => {
  assert.ok(err instanceof OpenAI.BadRequestError);
  assert.equal(err.param, 'top_p');
  assert.equal(err.type, 'invalid_request_error');
  assert.match(err.message, /top_p: must be in \(0, 1\]/);
});
await expectError(client.chat.completions.create({ model: 'no-such-model', messages: [{ role: 'user', content: 'x' }] }), 404,
  (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError);
    assert.equal(err.code, 'model_not_found');
    assert.equal(err.param, 'model');
  });
console.log('error objects: 400 top_p, 404 model_not_found');

// A stream cut mid-way: its blocks are held while it runs and freed once the client aborts.
const long = await client.completions.create({
  model, prompt: process.env.PROMPT, max_tokens: 100000, temperature: 0, stream: true, ignore_eos: true,
});
const chunks = long[Symbol.asyncIterator]();  // not for-await: leaving that loop would abort
for (let i = 0; i < 3; i++) {
  const { value } = await chunks.next();
  assert.equal(value.choices[0].finish_reason, null, 'the long stream ended before the cancel');
}
const held = await kvBlocksUsed();
long.controller.abort();
assert.ok(held > 0, `no KV blocks held by a running stream (${held})`);
let used = held;
for (let i = 0; i < 250 && used !== 0; i++) {
  await new Promise((r) => setTimeout(r, 20));
  used = await kvBlocksUsed();
}
assert.equal(used, 0, 'KV blocks not freed after the client aborted');
console.log(`cancel: ${held} KV blocks held while streaming, 0 after abort`);
console.log('openai sdk test: ok');
