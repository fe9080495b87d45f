// serve.mjs runs ONE load through llama-server itself: start it on a free
// loopback port with the case's flags and -lv 5, wait for /health, prove the load with
// a one-token completion, stop it with SIGTERM (the context's destructor
// prints its four-decimal compute checks on the way out) and return every
// line it logged. Verbosity 4 (what headroom serve passes) prints the
// buffer sizes; 5 adds llama.cpp's debug lines, which place every layer
// and carry those checks. Neither changes what is allocated.
import {spawn} from "node:child_process";
import net from "node:net";

// serverArgs renders a case's profile as the llama-server flags headroom
// emits for it (plan.Profile.Args; conformance's TestServerCommands checks
// that every golden's recorded command is exactly that).
export function serverArgs(c, opts = {}) {
    const nCtx = c.contextSize * c.sequences;
    // An RPC case offloads to the rpc-servers' devices from the CPU build.
    const ngl = c.backend === "cpu" && !c.rpc ? "0" : c.gpuLayers >= 999 ? "all" : String(c.gpuLayers);
    const f = ["-c", String(nCtx), "-np", String(c.sequences), "-ngl", ngl, "--fit", "off"];
    // llama-server's defaults are -b 2048 -ub 512; a case's batchSize is
    // the micro-batch, which sizes the compute graph.
    const ubatch = c.batchSize;
    const batch = Math.max(2048, ubatch);
    if (batch !== 2048)
        f.push("-b", String(batch));
    if (ubatch !== 512)
        f.push("-ub", String(ubatch));
    if (c.cacheV !== "f16" || c.flashAttention === true)
        f.push("-fa", "on");
    else if (c.flashAttention === false)
        f.push("-fa", "off");
    if (c.cacheK !== "f16")
        f.push("-ctk", c.cacheK);
    if (c.cacheV !== "f16")
        f.push("-ctv", c.cacheV);
    if (c.tensorSplit)
        f.push("-ts", c.tensorSplit.join(","));
    // A build that dropped --no-mmap (de3ff81) takes --load-mode none, as
    // headroom writes for it (plan.Rules.LoadMode).
    if (!c.mmap)
        f.push(...(opts.loadMode ? ["--load-mode", "none"] : ["--no-mmap"]));
    if (c.swaFull)
        f.push("--swa-full");
    if (c.cpuMoE)
        f.push("--n-cpu-moe", String(c.cpuMoE));
    if (c.embedding)
        f.push(c.embedding === "rerank" ? "--rerank" : "--embedding");
    if (c.draft)
        f.push("-md", opts.draftPath);
    if (c.spec)
        f.push("--spec-type", c.spec);
    if (c.draftMax)
        f.push("--spec-draft-n-max", String(c.draftMax));
    if (c.cacheDraft)
        f.push("-ctkd", c.cacheDraft, "-ctvd", c.cacheDraft);
    return f;
}

function freePort() {
    return new Promise((resolve, reject) => {
        const s = net.createServer();
        s.unref();
        s.on("error", reject);
        s.listen(0, "127.0.0.1", () => {
            const {port} = s.address();
            s.close(() => resolve(port));
        });
    });
}

// llama-server prefixes its log lines with the time since start and a level
// letter ("0.04.099.198 I sched_reserve: ..."); the figures' lines are
// llama.cpp's own text after it.
const PREFIX = /^(\d+\.\d+\.\d+\.\d+) ([A-Z]) /;

export function logLine(phase, raw) {
    const l = raw.replace(/\r$/, "").replace(/\x1b\[[0-9;]*[A-Za-z]/g, "");
    const m = PREFIX.exec(l);
    return m ? {phase, level: m[2], time: m[1], text: l.slice(m[0].length)} : {phase, level: "", text: l};
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// serveOnce returns {ok, error, lines, completion, timings_ms}. lines are
// {phase, level, text} as the library harness records them: phase "load"
// until the server is ready, "serve" for the completion, "stop" after.
// wrap, when given, is a command that execs llama-server (its argv
// follows), as residency.mjs uses to start it inside a memory cgroup;
// probe(pid) runs after the completion and its answer is kept as
// result.probe.
export async function serveOnce({bin, modelPath, args, env, timeoutMs = 600_000, wrap = [], nPredict = 1, probe = null}) {
    const port = await freePort();
    const argv = ["-m", modelPath, "--host", "127.0.0.1", "--port", String(port), "-lv", "5", ...args];
    const lines = [];
    let phase = "load";
    const t0 = Date.now();
    const timings_ms = {};
    const child = wrap.length > 0
        ? spawn(wrap[0], [...wrap.slice(1), bin, ...argv], {env, stdio: ["ignore", "pipe", "pipe"]})
        : spawn(bin, argv, {env, stdio: ["ignore", "pipe", "pipe"]});
    let exited = null;
    const exitP = new Promise((resolve) => child.on("exit", (code, signal) => {
        exited = {code, signal};
        resolve(exited);
    }));
    const tail = {stdout: "", stderr: ""};
    for (const stream of ["stdout", "stderr"]) {
        child[stream].setEncoding("utf8");
        child[stream].on("data", (chunk) => {
            const text = tail[stream] + chunk;
            const parts = text.split("\n");
            tail[stream] = parts.pop();
            for (const l of parts)
                if (l.trim() !== "" && l.trim() !== ".")
                    lines.push(logLine(phase, l));
        });
    }
    const base = `http://127.0.0.1:${port}`;
    const result = {ok: false, error: null, lines, argv, completion: null, exit: null, timings_ms};
    try {
        for (;;) {
            if (exited)
                throw new Error(`llama-server exited during the load (code ${exited.code}, signal ${exited.signal})`);
            if (Date.now() - t0 > timeoutMs)
                throw new Error(`not ready after ${timeoutMs} ms`);
            try {
                const r = await fetch(base + "/health", {signal: AbortSignal.timeout(5000)});
                if (r.status === 200)
                    break;
            } catch {
                // not listening yet
            }
            await sleep(200);
        }
        timings_ms.ready = Date.now() - t0;
        phase = "serve";
        // An embedding or reranking server is proven by what it serves.
        // Token ids, which every synth vocabulary has (its text may
        // tokenize to nothing); a reranker's prompt holds its control
        // tokens.
        const [route, req] = args.includes("--rerank")
            ? ["/v1/rerank", {query: "Hello", documents: ["Hello", "World"]}]
            : args.includes("--embedding") ? ["/v1/embeddings", {input: [1000, 1001, 1002, 1003]}]
            : ["/completion", {prompt: "Hello", n_predict: nPredict, cache_prompt: false}];
        const r = await fetch(base + route, {
            method: "POST",
            headers: {"Content-Type": "application/json"},
            body: JSON.stringify(req),
            signal: AbortSignal.timeout(300_000)
        });
        const body = await r.text();
        if (r.status !== 200)
            throw new Error(`${route} answered ${r.status}: ${body.slice(0, 300)}`);
        const answer = JSON.parse(body);
        result.completion = {status: r.status, content_bytes: route === "/completion" ? (answer.content ?? "").length : body.length};
        if (nPredict > 1)
            result.completion.timings = answer.timings ?? null;
        timings_ms.completion = Date.now() - t0 - timings_ms.ready;
        if (probe)
            result.probe = await probe(child.pid);
        result.ok = true;
    } catch (err) {
        result.error = String(err?.message ?? err);
    } finally {
        phase = "stop";
        if (!exited) {
            child.kill("SIGTERM");
            const killer = setTimeout(() => child.kill("SIGKILL"), 30_000);
            await exitP;
            clearTimeout(killer);
        }
        for (const stream of ["stdout", "stderr"])
            if (tail[stream].trim() !== "")
                lines.push(logLine(phase, tail[stream]));
        result.exit = exited;
        timings_ms.total = Date.now() - t0;
    }
    return result;
}
