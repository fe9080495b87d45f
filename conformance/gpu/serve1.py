#!/usr/bin/env python3
"""serve1.py runs ONE llama-server load on the GPU machine, where there is
no Node to run harness/serve.mjs: the same steps with the standard library.

    serve1.py --bin BIN --model GGUF --log FILE --meta FILE [--timeout S] -- FLAGS...

It starts llama-server on a free loopback port with the case's flags and
-lv 5 (the verbosity serve.mjs uses: 4 prints the buffer sizes, 5 adds the
debug lines that place every layer and the destructor's compute checks),
waits for /health, proves the load with a one-token completion and stops
it with SIGTERM, so the context's destructor prints its checks. stdout and
stderr go to one log file as llama-server writes them (a kill of this
script still leaves the log); the meta file says what happened, with the
byte offsets in the log where the server was ready and where it was told
to stop, which gpu/import.mjs turns into serve.mjs's phases.
"""
import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status


def post(url, body, timeout):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--meta", required=True)
    ap.add_argument("--timeout", type=float, default=600, help="seconds for the whole load, completion and stop")
    ap.add_argument("flags", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    flags = a.flags[1:] if a.flags[:1] == ["--"] else a.flags

    port = free_port()
    argv = [a.bin, "-m", a.model, "--host", "127.0.0.1", "--port", str(port), "-lv", "5"] + flags
    t0 = time.monotonic()
    deadline = t0 + a.timeout
    ms = lambda: round((time.monotonic() - t0) * 1000)
    meta = {"argv": argv, "flags": flags, "ok": False, "error": None, "completion": None, "exit": None,
            "timings_ms": {}, "offsets": {}}
    base = f"http://127.0.0.1:{port}"
    with open(a.log, "wb") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"llama-server exited during the load (code {proc.returncode})")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"not ready after {a.timeout:.0f} s")
                try:
                    if get(base + "/health", 5) == 200:
                        break
                except (urllib.error.URLError, OSError):
                    pass  # not listening yet, or still loading (503)
                time.sleep(0.2)
            meta["timings_ms"]["ready"] = ms()
            meta["offsets"]["ready"] = os.path.getsize(a.log)
            status, body = post(base + "/completion", {"prompt": "Hello", "n_predict": 1, "cache_prompt": False},
                                max(5, deadline - time.monotonic()))
            if status != 200:
                raise RuntimeError(f"completion answered {status}: {body[:300].decode(errors='replace')}")
            meta["completion"] = {"status": status, "content_bytes": len(json.loads(body).get("content", ""))}
            meta["timings_ms"]["completion"] = ms() - meta["timings_ms"]["ready"]
            meta["ok"] = True
        except Exception as e:  # every failure is recorded in the meta, not raised
            meta["error"] = str(e)
        finally:
            meta["offsets"]["stop"] = os.path.getsize(a.log)
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            rc = proc.returncode
            meta["exit"] = {"code": rc if rc >= 0 else None, "signal": signal.Signals(-rc).name if rc < 0 else None}
            meta["timings_ms"]["total"] = ms()
    with open(a.meta, "w") as f:
        json.dump(meta, f, indent=1)
    return 0 if meta["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
