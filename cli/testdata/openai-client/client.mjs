// client.mjs drives headroom serve-api with OpenAI's own JavaScript
// client, as a user's program would, and prints one JSON line per step:
//
//   node client.mjs BASE_URL STEP...
//
// where STEP is stream:MODEL (a streamed chat), chat:MODEL (one answer)
// or complete:MODEL (a /v1/completions request). A step that fails
// prints its status and message and the next step runs; the exit status
// is 0 once every step has been tried.
import OpenAI from "openai";

const [base, ...steps] = process.argv.slice(2);
if (!base || steps.length === 0) {
  console.error("usage: node client.mjs BASE_URL stream:MODEL|chat:MODEL|complete:MODEL...");
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

for (const step of steps) {
  const i = step.indexOf(":");
  await run(step.slice(0, i), step.slice(i + 1));
}
