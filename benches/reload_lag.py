"""Reload lag: how late the other targets' probes are sent during config reloads while one
target hangs, against the same reloads with that target answering.

Two targets, each probed at `--rate` per second: `steady` (the mock engine) and `other`, which is
either a server that accepts and never answers (`hung`) or a second mock (`answering`). Every
`--every` seconds the config is rewritten with only `other` changed and the prober is asked to
reload (`POST /-/reload`). From the prober's probe log it takes the send lag (sent minus
intended time) of every `steady` probe meant for the `--window` seconds after a reload, and
prints its p50/p99/max for both cases, with the count of those probes and of all `steady`
probes scheduled vs recorded. Also printed: the share of `/readyz` polls answered 200.

Usage: python3 benches/reload_lag.py BIN [--rate 20] [--reloads 6] [--every 3] [--window 2]
                                          [--grace 5]
"""
import argparse, json, os, socket, subprocess, tempfile, threading, time, urllib.request


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def hung_server():
    """Accepts connections, reads nothing back to the client, never answers."""
    srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1024)
    held = []

    def loop():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)
    threading.Thread(target=loop, daemon=True).start()
    return srv.getsockname()[1], srv


def wait_ready(port):
    for _ in range(300):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1); return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listening on {port}")


def config(port, steady, other, model, rate, grace):
    return f"""listen: 127.0.0.1:{port}
probe: {{rate: {rate}, seed: 5, shutdown_grace: {grace}s, max_in_flight: 100000}}
targets:
  - name: steady
    base_url: http://127.0.0.1:{steady}
    api: openai-chat
    model: mock-llama
  - name: other
    base_url: http://127.0.0.1:{other}
    api: openai-chat
    model: {model}
    timeouts: {{connect: 2s, ttft: 60s, idle: 60s, total: 60s}}
scenarios:
  - {{name: s, input_tokens: 16, output_tokens: 4}}
"""


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run_case(a, hung):
    tmp = tempfile.mkdtemp(prefix="reload-lag-")
    mock_port, port = free_port(), free_port()
    procs = [subprocess.Popen([a.bin, "--log", "warn", "mock", "--listen", f"127.0.0.1:{mock_port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    if hung:
        other, srv = hung_server()
    else:
        other, srv = free_port(), None
        procs.append(subprocess.Popen([a.bin, "--log", "warn", "mock", "--listen", f"127.0.0.1:{other}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    cfg, probes = os.path.join(tmp, "config.yaml"), os.path.join(tmp, "probes.jsonl")
    open(cfg, "w").write(config(port, mock_port, other, "m0", a.rate, a.grace))
    time.sleep(0.5)
    log = open(os.path.join(tmp, "prober.log"), "w")
    prober = subprocess.Popen([a.bin, "--log", "info", "probe", "--web.enable-lifecycle", "--probe-log", probes, "--config", cfg], stdout=subprocess.DEVNULL, stderr=log)
    wait_ready(port)
    time.sleep(2)
    reloads, ready, polls = [], 0, 0
    for i in range(a.reloads):
        open(cfg, "w").write(config(port, mock_port, other, f"m{i + 1}", a.rate, a.grace))
        reloads.append(time.time())
        urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/-/reload", method="POST"), timeout=5).read()
        end = time.time() + a.every
        while time.time() < end:
            polls += 1
            try:
                ready += urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200
            except OSError:
                pass
            time.sleep(0.1)
    prober.send_signal(15)
    prober.wait(timeout=a.grace + 30)
    for p in procs:
        p.terminate(); p.wait()
    if srv:
        srv.close()
    lags, steady = [], 0
    for line in open(probes):
        r = json.loads(line)
        if r["target"] != "steady":
            continue
        steady += 1
        if any(t <= r["intended_unix_s"] < t + a.window for t in reloads) and r["outcome"] != "dropped":
            lags.append(1000 * (r["sent_unix_s"] - r["intended_unix_s"]))
    text = open(log.name).read()
    # scheduled=/recorded= of every generation's last accounting line.
    acc = []
    for l in text.splitlines():
        if "scheduled=" in l and ("finished" in l or "stopped" in l):
            f = dict(w.split("=", 1) for w in l.split() if w.startswith(("scheduled=", "recorded=")))
            acc.append((int(f["scheduled"]), int(f["recorded"])))
    return lags, steady, acc, ready, polls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--rate", type=float, default=20)
    ap.add_argument("--reloads", type=int, default=6)
    ap.add_argument("--every", type=float, default=3)
    ap.add_argument("--window", type=float, default=2)
    ap.add_argument("--grace", type=float, default=5)
    a = ap.parse_args()
    print(f"{a.reloads} reloads every {a.every:g} s, {a.rate:g} probes/s per target, lag of steady's probes meant for {a.window:g} s after each reload"
          f" (about {a.rate * a.window * a.reloads:.0f} expected: fewer means its schedule paused)")
    print(f"{'other target':<14}{'probes':>8}{'p50_ms':>9}{'p99_ms':>9}{'max_ms':>9}{'readyz_200':>12}  scheduled=recorded per generation")
    for hung in (False, True):
        lags, steady, acc, ready, polls = run_case(a, hung)
        ok = all(s == r for s, r in acc) and bool(acc)
        print(f"{'hung' if hung else 'answering':<14}{len(lags):>8}{pct(lags, 0.5):>9.2f}{pct(lags, 0.99):>9.2f}{max(lags, default=float('nan')):>9.2f}"
              f"{ready:>6}/{polls:<5}  {'yes' if ok else 'NO'} {acc}")


if __name__ == "__main__":
    main()
