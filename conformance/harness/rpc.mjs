// rpc.mjs starts the rpc-servers an RPC case loads through: llama.cpp's
// ggml-rpc-server from the same build as llama-server, each on a free
// loopback port, so that llama-server --rpc sees as many remote devices as
// the case asks for. Every server here runs on this machine's CPU backend;
// what differs from one machine is only the path the tensors take (the
// RPC protocol over TCP), which is what the goldens measure.
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import {spawn} from "node:child_process";

// rpcServerBin finds the rpc-server next to llama-server: engine.sh builds
// it as ggml-rpc-server; upstream builds name it rpc-server.
export function rpcServerBin(dir) {
    for (const name of ["ggml-rpc-server", "rpc-server"]) {
        const p = path.join(dir, name);
        if (fs.existsSync(p))
            return p;
    }
    throw new Error(`no ggml-rpc-server or rpc-server in ${dir} (engine.sh builds it with -DGGML_RPC=ON)`);
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

// listening waits until a TCP connect to port succeeds. The probe's
// connection is one the server accepts and drops at once (it expects a
// HELLO first), which costs it nothing.
async function listening(port, child, timeoutMs) {
    const t0 = Date.now();
    for (;;) {
        if (child.exitCode !== null || child.signalCode !== null)
            throw new Error(`rpc-server on port ${port} exited (code ${child.exitCode}, signal ${child.signalCode})`);
        const ok = await new Promise((resolve) => {
            const s = net.connect(port, "127.0.0.1");
            s.once("connect", () => {
                s.destroy();
                resolve(true);
            });
            s.once("error", () => resolve(false));
        });
        if (ok)
            return;
        if (Date.now() - t0 > timeoutMs)
            throw new Error(`rpc-server on port ${port} not listening after ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 100));
    }
}

// startRPCServers starts n rpc-servers (one thread each: the goldens measure
// memory, and the machines these run on have two cores) and returns their
// endpoints in --rpc order, the lines each printed, and stop().
export async function startRPCServers(bin, n, {env} = {}) {
    const servers = [];
    const stop = async () => {
        await Promise.all(servers.map(({child}) => new Promise((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null)
                return resolve();
            child.once("exit", resolve);
            child.kill("SIGTERM");
            setTimeout(() => child.kill("SIGKILL"), 10_000).unref();
        })));
    };
    try {
        for (let i = 0; i < n; i++) {
            const port = await freePort();
            const child = spawn(bin, ["-H", "127.0.0.1", "-p", String(port), "-t", "1"], {env, stdio: ["ignore", "pipe", "pipe"]});
            const lines = [];
            for (const stream of ["stdout", "stderr"]) {
                child[stream].setEncoding("utf8");
                child[stream].on("data", (chunk) => lines.push(...chunk.split("\n").filter((l) => l.trim() !== "")));
            }
            servers.push({child, port, lines, endpoint: `127.0.0.1:${port}`});
            await listening(port, child, 30_000);
        }
    } catch (err) {
        await stop();
        throw err;
    }
    return {
        endpoints: servers.map((s) => s.endpoint),
        // What each server said of itself: its protocol version and the
        // device it serves with the memory it reports.
        banners: () => servers.map((s) => ({endpoint: s.endpoint, lines: s.lines.filter((l) => !/client connection/.test(l))})),
        stop
    };
}
