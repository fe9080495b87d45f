// client.mjs drives headroom serve-api with OpenAI's own JavaScript
// client, as a user's program would, and prints one JSON line per step:
//
//   node client.mjs BASE_URL STEP...
//
// where STEP is stream:MODEL (a streamed chat), chat:MODEL (one answer),
// complete:MODEL (a /v1/completions request), embed:MODEL (two inputs
// to /v1/embeddings) or rerank:MODEL (a query and two documents to
// /v1/rerank, which OpenAI's client has no method for), or
// burst:N:MODEL,MODEL,... (N streamed chats at once, the models in turn,
// reported together). A step that fails
// prints its status and message and the next step runs; the exit status
// is 0 once every step has been tried.
import OpenAI from "openai";

const [base, ...steps] = process.argv.slice(2);
if (!base || steps.length === 0) {
  console.error("usage: node client.mjs BASE_URL stream:MODEL|chat:MODEL|complete:MODEL|embed:MODEL|rerank:MODEL...");
  process.exit(2);
}
// No retries: a 503 from headroom is the answer under test, not a hiccup.
const client = new OpenAI({ baseURL: base, apiKey: "unused", maxRetries: 0, timeout: 600_000 });
const messages = [{ role: "user", content: "Say hello." }];

async function run(kind, model) {
  const out = { step: kind, model };
  const started = performance.now();
  try {
    if (kind === "stream") {
      const stream = await client.chat.completions.create({ model, messages, stream: true, max_tokens: 8 });
      out.chunks = 0;
      out.text = "";
      for await (const chunk of stream) {
        if (out.chunks === 0) {
          out.first_byte_ms = Math.round(performance.now() - started);
          out.named = chunk.model;
        }
        out.chunks++;
        out.text += chunk.choices[0]?.delta?.content ?? "";
      }
      // The iterator ends without an error only after a whole stream.
      out.whole = true;
    } else if (kind === "chat") {
      const r = await client.chat.completions.create({ model, messages, max_tokens: 8 });
      out.named = r.model;
      out.text = r.choices[0]?.message?.content ?? "";
      out.finish = r.choices[0]?.finish_reason;
    } else if (kind === "complete") {
      const r = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 8 });
      out.named = r.model;
      out.text = r.choices[0]?.text ?? "";
      out.finish = r.choices[0]?.finish_reason;
      out.tokens = r.usage?.completion_tokens;
    } else if (kind === "embed") {
      const r = await client.embeddings.create({ model, input: ["Hello", "World"] });
      out.named = r.model;
      out.vectors = r.data.length;
      out.dims = r.data[0]?.embedding?.length ?? 0;
    } else if (kind === "rerank") {
      const r = await fetch(base + "/rerank", {
        method: "POST", headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ model, query: "Hello", documents: ["Hello", "World"] }),
      });
      const body = await r.json();
      if (!r.ok) {
        throw Object.assign(new Error(body?.error?.message ?? JSON.stringify(body)), { status: r.status });
      }
      out.named = body.model;
      out.results = body.results?.length ?? 0;
    } else {
      throw new Error(`unknown step ${kind}`);
    }
    out.status = 200;
  } catch (err) {
    out.status = err.status ?? 0;
    out.error = err.message;
  }
  out.ms = Math.round(performance.now() - started);
  console.log(JSON.stringify(out));
}

// streamOnce runs one streamed chat to its end: whether it was whole,
// its chunks, and the model its chunks name.
async function streamOnce(model) {
  const stream = await client.chat.completions.create({ model, messages, stream: true, max_tokens: 4 });
  let chunks = 0;
  let named = "";
  for await (const chunk of stream) {
    if (chunks === 0) named = chunk.model;
    chunks++;
  }
  return { chunks, named };
}

// burst fires n streamed chats at once over models, in turn, and prints
// one line: how many were whole (their iterator ended without an error,
// after at least one chunk naming the model asked), and the failures.
async function burst(n, models) {
  const started = performance.now();
  const out = { step: "burst", model: models.join(","), requests: n, whole_count: 0, failures: [] };
  await Promise.all(Array.from({ length: n }, async (_, i) => {
    const model = models[i % models.length];
    try {
      const r = await streamOnce(model);
      if (r.chunks > 0 && r.named === model) out.whole_count++;
      else out.failures.push(`${i} ${model}: ${r.chunks} chunks naming ${r.named}`);
    } catch (err) {
      out.failures.push(`${i} ${model}: ${err.status ?? 0} ${err.message}`);
    }
  }));
  out.status = out.failures.length === 0 ? 200 : 0;
  out.ms = Math.round(performance.now() - started);
  console.log(JSON.stringify(out));
}

for (const step of steps) {
  const i = step.indexOf(":");
  if (step.slice(0, i) === "burst") {
    const [n, models] = step.slice(i + 1).split(":");
    await burst(Number(n), models.split(","));
    continue;
  }
  await run(step.slice(0, i), step.slice(i + 1));
}
