"""Memory under attack: the prober's RSS at rest, then its peak under each attack a peer or a
config author can mount, against the target of baseline + 64 MiB.

Each attack gets a fresh prober (`llmprobe probe`, one target on the mock engine, 5 probes/s):
its baseline is VmRSS after a warm-up; the attack starts with a reload (SIGHUP) to a config
that aims at the attacker, or from outside; the peak is VmHWM (the kernel's high-water mark)
at the end. Attacks:

  gzip-bomb-general  a target answering every probe with a gzip stream that inflates to 512 MiB,
                     sent through the general client (a proxy is configured, loopback exempt)
  gzip-bomb-lean     the same through the default client
  engine-page-1M     an engine /metrics source whose page has 10^6 series (about 16 MB)
  post-2MB-x128      128 unauthenticated 2 MB POSTs to /api/v1/releases at once, 4 rounds
  reload-10k         a reload to 10,000 targets (over the series limit: refused)
  reload-max-to-1    a start with the largest accepted config (760 targets), then a reload to
                     one target: the RSS left after it, against a one-target prober's baseline
  engine-page-400k   an engine page of 400,000 series in 6.3 MB (under the byte cap, over the
                     series cap): refused while it is read; bound baseline + 16 MiB
  yaml-*             hostile config files (nested aliases, 10^6 aliases in 4 MB, 2x10^5 aliases
                     in 0.8 MB, 100,000-deep nesting):
                     `check-config` and a start on each (time, peak RSS of the process, exit code,
                     error lines), and a reload to each (time to rejection, peak, RSS after the
                     rejection against before); bounds: refused within 1 s, peak <= baseline + 64
                     MiB, RSS after a rejected reload within 8 MiB of before

Usage: python3 benches/memory_attacks.py BIN [--only NAME] [--hold 15]
"""
import argparse, gzip, http.server, os, signal, socket, socketserver, subprocess, sys, tempfile, threading, time, urllib.request, zlib

LIMIT_MIB = 64


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def status_kib(pid, key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def wait_ready(port):
    for _ in range(600):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1); return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listening on {port}")


class Quiet(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass


def serve(handler):
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv.server_address[1], srv


def gzip_bomb(inflated_mib=512):
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"data: " + b"a" * (1 << 20)
    out = [c.compress(chunk)] + [c.compress(b"a" * (1 << 20)) for _ in range(inflated_mib - 1)]
    return b"".join(out) + c.flush()


def bomb_server():
    body = gzip_bomb()

    class H(Quiet):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-encoding", "gzip")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except OSError:
                pass

        def do_GET(self):
            self.send_response(404); self.send_header("content-length", "0"); self.end_headers()
    return serve(H)


def hostile_yaml(kind, valid):
    """The hostile config files: each keeps a valid config around its attack."""
    if kind == "yaml-aliases-nested":
        text = "a0: &a0 [" + ",".join(["1"] * 100) + "]\n"
        for level in range(1, 7):
            text += f"a{level}: &a{level} [" + ",".join([f"*a{level - 1}"] * 100) + "]\n"
        return valid + text
    if kind in ("yaml-aliases-1M", "yaml-aliases-200k"):
        n = 1_000_000 if kind == "yaml-aliases-1M" else 200_000
        head, _ = valid.split("scenarios:\n", 1)
        return head + "scenarios: [&s {name: s, input_tokens: 16, output_tokens: 8}" + ", *s" * n + "]\n"
    if kind == "yaml-deep-100k":
        head, tail = valid.split("targets:\n", 1)
        return head + "targets: " + "[" * 100_000 + "]" * 100_000 + "\nscenarios:\n" + tail.split("scenarios:\n", 1)[1]
    raise ValueError(kind)


def one_shot(argv):
    """Runs a command to its end: (seconds, peak RSS MiB, exit code, stderr lines, first line).
    The peak comes from GNU time, which forks the command from its own small process: a child
    forked from this script would carry the script's own peak (Linux keeps it across exec)."""
    out = tempfile.mktemp(prefix="mem-time-")
    start = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-o", out, "-f", "%M"] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    secs = time.monotonic() - start
    err = p.stderr.decode(errors="replace")
    peak = int(open(out).read().strip().splitlines()[-1]) / 1024
    os.remove(out)
    lines = [l for l in err.splitlines() if l.strip()]
    return secs, peak, p.returncode, len(lines), (lines[0] if lines else "")


def metrics_page_server(series=1_000_000):
    page = "".join(f'm{{i="{i}"}} 1\n' for i in range(series)).encode()

    class H(Quiet):
        def do_GET(self):
            self.send_response(200)
            self.send_header("content-type", "text/plain; version=0.0.4")
            self.send_header("content-length", str(len(page)))
            self.end_headers()
            try:
                self.wfile.write(page)
            except OSError:
                pass
    return serve(H), len(page)


def base_config(port, mock, targets=1, rate=5, extra=""):
    t = "".join(f"  - {{name: t{i}, base_url: 'http://127.0.0.1:{mock}', api: openai-chat, model: mock-llama}}\n" for i in range(targets))
    return f"""listen: 127.0.0.1:{port}
probe: {{rate: {rate}, seed: 1, shutdown_grace: 2s, max_in_flight: 100000}}
targets:
{t}scenarios:
  - {{name: s, input_tokens: 16, output_tokens: 8}}
{extra}"""


class Prober:
    def __init__(self, bin, text, env=None):
        self.dir = tempfile.mkdtemp(prefix="mem-attack-")
        self.cfg = os.path.join(self.dir, "config.yaml")
        open(self.cfg, "w").write(text)
        self.log = open(os.path.join(self.dir, "prober.log"), "w")
        self.p = subprocess.Popen([bin, "--log", "warn", "probe", "--config", self.cfg], stdout=subprocess.DEVNULL, stderr=self.log, env=env)

    def reload(self, text):
        open(self.cfg, "w").write(text)
        self.p.send_signal(signal.SIGHUP)

    def rss(self):
        return status_kib(self.p.pid, "VmRSS") / 1024

    def peak(self):
        return status_kib(self.p.pid, "VmHWM") / 1024

    def logged(self):
        return open(self.log.name).read()

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill(); self.p.wait()


def posts(port, n=128, size=2 << 20):
    head = (f"POST /api/v1/releases HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {size}\r\n\r\n").encode()
    body = b"{" + b" " * (size - 2) + b"}"
    answers = []

    def one():
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(head)
            try:
                s.sendall(body)
            except OSError:
                pass
            answers.append(s.recv(64).split(b"\r\n", 1)[0].decode(errors="replace"))
            s.close()
        except OSError as e:
            answers.append(type(e).__name__)
    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return answers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--only")
    ap.add_argument("--hold", type=float, default=15, help="seconds each attack lasts")
    a = ap.parse_args()
    mock = free_port()
    mock_p = subprocess.Popen([a.bin, "--log", "error", "mock", "--listen", f"127.0.0.1:{mock}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    rows = []

    def attack(name, fn):
        if a.only and a.only != name:
            return
        fn(name)

    def start(text, env=None):
        port = int(text.split("listen: 127.0.0.1:", 1)[1].split("\n", 1)[0])
        p = Prober(a.bin, text, env)
        wait_ready(port)
        time.sleep(5)
        return p, port

    def row(name, base, peak, note="", limit=True):
        ok = peak <= base + LIMIT_MIB
        rows.append((name, base, peak, note, ok))
        print(f"{name:<20}{base:>10.1f}{peak:>10.1f}{peak - base:>+10.1f}  {'pass' if ok else 'FAIL'}  {note}", flush=True)

    print(f"{'attack':<20}{'base_MiB':>10}{'peak_MiB':>10}{'delta':>10}  target: peak <= base + {LIMIT_MIB} MiB", flush=True)

    def bomb(general):
        def run(name):
            bport, srv = bomb_server()
            env = dict(os.environ)
            if general:
                env.update(HTTP_PROXY="http://127.0.0.1:9", NO_PROXY="127.0.0.1")
            port = free_port()
            p, _ = start(base_config(port, mock), env)
            base = p.rss()
            text = base_config(port, mock) + ""
            text = text.replace("targets:\n", f"targets:\n  - {{name: bomb, base_url: 'http://127.0.0.1:{bport}', api: openai-chat, model: m}}\n", 1)
            p.reload(text)
            time.sleep(a.hold)
            peak = p.peak()
            m = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
            bombs = sum(float(l.rsplit(" ", 1)[1]) for l in m.splitlines() if l.startswith("llmprobe_requests_total{") and 'target="bomb"' in l)
            p.stop(); srv.shutdown()
            row(name, base, peak, f"{bombs:.0f} bomb answers recorded")
        return run

    attack("gzip-bomb-general", bomb(True))
    attack("gzip-bomb-lean", bomb(False))

    def scrape_page(*series):
        """A prober reloaded to scrape a hostile engine page: (base, peak, page size, source_up
        lines, the prober's log)."""
        (sport, srv), size = metrics_page_server(*series)
        port = free_port()
        p, _ = start(base_config(port, mock))
        base = p.rss()
        p.reload(base_config(port, mock, extra=f"sources:\n  - {{kind: engine, engine: vllm, url: 'http://127.0.0.1:{sport}/metrics', interval: 2s, timeout: 2s}}\n"))
        time.sleep(a.hold)
        peak = p.peak()
        m = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
        up = [l for l in m.splitlines() if l.startswith("llmprobe_source_up")]
        logged = p.logged()
        p.stop(); srv.shutdown()
        return base, peak, size, up, logged

    def engine_page(name):
        base, peak, size, up, _ = scrape_page()
        row(name, base, peak, f"page {size / 1e6:.1f} MB; {' '.join(up) or 'no source_up'}")

    attack("engine-page-1M", engine_page)

    def post_flood(name):
        port = free_port()
        d = tempfile.mkdtemp(prefix="mem-token-")
        tok = os.path.join(d, "token")
        open(tok, "w").write("s3cret-token-value\n")
        os.chmod(tok, 0o600)
        p, _ = start(base_config(port, mock, extra=f"detect: {{release_token_file: {tok}}}\n"))
        base = p.rss()
        answers = []
        for _ in range(4):
            answers += posts(port)
        time.sleep(1)
        peak = p.peak()
        p.stop()
        kinds = {}
        for x in answers:
            kinds[x] = kinds.get(x, 0) + 1
        row(name, base, peak, f"answers: {kinds}")

    attack("post-2MB-x128", post_flood)

    def reload_10k(name):
        port = free_port()
        p, _ = start(base_config(port, mock))
        base = p.rss()
        p.reload(base_config(port, mock, targets=10_000, rate=0.01))
        deadline = time.time() + 120
        while "reload rejected" not in p.logged() and time.time() < deadline:
            time.sleep(0.5)
        time.sleep(2)
        peak = p.peak()
        rejected = "over the limit" in p.logged()
        p.stop()
        row(name, base, peak, "refused by the series limit" if rejected else "NOT refused")

    attack("reload-10k", reload_10k)

    def max_to_one(name):
        port = free_port()
        one, _ = start(base_config(port, mock))
        base = one.rss()
        one.stop()
        port = free_port()
        p, _ = start(base_config(port, mock, targets=760, rate=0.05))
        time.sleep(10)
        big = p.rss()
        peak_big = p.peak()
        p.reload(base_config(port, mock))
        # The old generation ends within its grace (2 s); its state is then dropped.
        time.sleep(10)
        after = p.rss()
        p.stop()
        rows.append((name, base, after, "", after <= base + LIMIT_MIB))
        print(f"{name:<20}{base:>10.1f}{after:>10.1f}{after - base:>+10.1f}  {'pass' if after <= base + LIMIT_MIB else 'FAIL'}  "
              f"RSS after the reload to one target (760 targets: {big:.1f} MiB, peak {peak_big:.1f} MiB; returned {big - after:.1f} MiB)", flush=True)

    attack("reload-max-to-1", max_to_one)

    def engine_page_400k(name):
        base, peak, size, up, logged = scrape_page(400_000)
        refused = "more than 50000 series" in logged
        ok = peak <= base + 16
        rows.append((name, base, peak, "", ok))
        print(f"{name:<20}{base:>10.1f}{peak:>10.1f}{peak - base:>+10.1f}  {'pass' if ok else 'FAIL'}  bound +16 MiB; page {size / 1e6:.1f} MB; "
              f"{'refused by the series cap' if refused else 'NOT refused'}; {' '.join(up) or 'no source_up'}", flush=True)

    attack("engine-page-400k", engine_page_400k)

    def yaml_attack(name):
        d = tempfile.mkdtemp(prefix="mem-yaml-")
        valid = base_config(free_port(), mock)
        hostile = os.path.join(d, "hostile.yaml")
        open(hostile, "w").write(hostile_yaml(name, valid))
        size = os.path.getsize(hostile)
        good = os.path.join(d, "good.yaml")
        open(good, "w").write(valid)
        _, base_rss, _, _, _ = one_shot([a.bin, "check-config", good])
        for what, argv in [("check-config", [a.bin, "check-config", hostile]), ("start", [a.bin, "--log", "warn", "probe", "--config", hostile])]:
            secs, peak, rc, nlines, first = one_shot(argv)
            ok = secs <= 1 and peak <= base_rss + LIMIT_MIB and rc == 2
            rows.append((f"{name} {what}", base_rss, peak, "", ok))
            print(f"{name + ' ' + what:<34}{base_rss:>8.1f}{peak:>9.1f}{peak - base_rss:>+9.1f}  {'pass' if ok else 'FAIL'}  "
                  f"file {size / 1e3:.1f} KB; {secs:.2f} s; exit {rc}; {nlines} error line(s): {first[:110]}", flush=True)
        port = free_port()
        p, _ = start(base_config(port, mock))
        base = p.rss()
        before = len(p.logged())
        t0 = time.monotonic()
        p.reload(hostile_yaml(name, base_config(port, mock)))
        deadline = t0 + 60
        while "reload rejected" not in p.logged()[before:] and time.monotonic() < deadline:
            time.sleep(0.01)
        secs = time.monotonic() - t0
        time.sleep(2)
        peak, after = p.peak(), p.rss()
        rejected = [l for l in p.logged()[before:].splitlines() if "reload rejected" in l]
        p.stop()
        ok = secs <= 1 and peak <= base + LIMIT_MIB and after <= base + 8 and len(rejected) == 1
        rows.append((f"{name} reload", base, peak, "", ok))
        print(f"{name + ' reload':<34}{base:>8.1f}{peak:>9.1f}{peak - base:>+9.1f}  {'pass' if ok else 'FAIL'}  "
              f"rejected after {secs:.2f} s; RSS after {after:.1f} MiB ({after - base:+.1f}); {len(rejected)} log line(s)", flush=True)

    for kind in ["yaml-aliases-nested", "yaml-aliases-1M", "yaml-aliases-200k", "yaml-deep-100k"]:
        attack(kind, yaml_attack)
    mock_p.terminate(); mock_p.wait()
    failed = [r[0] for r in rows if not r[4]]
    print("all pass" if not failed else f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
