"""Prober benchmark: CPU cost per 1,000 requests and the highest rate held with lag p99 <= 1 ms.

Runs the mock engine (`llmprobe mock --profile load-test`) and the prober (`llmprobe probe`) as
separate processes, reads the prober's CPU time from /proc and its counters from /metrics.
Figures are medians over repeats; the machine's other load shows up in them, so quote them with
the machine they ran on.
"""
import os, re, socket, statistics, subprocess, sys, tempfile, time, urllib.request

BIN = sys.argv[1]
QUICK = "--quick" in sys.argv
TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close(); return port


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def scrape(port):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


def total(text, name, *labels):
    s = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(l in line for l in labels):
            s += float(line.rsplit(" ", 1)[1])
    return s


def lag_buckets(text):
    out = {}
    for m in re.finditer(r'^llmprobe_schedule_lag_seconds_bucket\{.*le="([^"]+)"\} (\S+)', text, re.M):
        out[m.group(1)] = out.get(m.group(1), 0) + float(m.group(2))
    return out


def wait_ready(port, path="/metrics"):
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=1); return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listening on {port}")


def write_config(port, mock_port, rate, output_tokens):
    cfg = f"""listen: 127.0.0.1:{port}
probe: {{rate: {rate}, seed: 7, max_in_flight: 100000, shutdown_grace: 60s}}
targets:
  - name: mock
    base_url: http://127.0.0.1:{mock_port}
    api: openai-completions
    model: mock-llama
    timeouts: {{connect: 2s, ttft: 30s, idle: 30s, total: 60s}}
scenarios:
  - {{name: s, input_tokens: 64, output_tokens: {output_tokens}}}
"""
    f = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    f.write(cfg); f.close()
    return f.name


def cpu_per_request(mock_port, rate, output_tokens, seconds):
    """Whole-process CPU (user+sys, from wait4) of a prober that schedules for `seconds`, then
    stops scheduling and lets every probe finish; divided by the probes it recorded."""
    port = free_port()
    path = write_config(port, mock_port, rate, output_tokens)
    proc = subprocess.Popen([BIN, "--log", "info", "probe", "--config", path], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_ready(port)
    time.sleep(seconds)
    final = scrape(port)
    proc.send_signal(15)
    _, _, usage = os.wait4(proc.pid, 0)
    log = proc.stderr.read()
    os.unlink(path)
    m = re.search(r"stopped scheduled=(\d+) recorded=(\d+)", log)
    recorded = int(m.group(2)) if m else 0
    errors = total(final, "llmprobe_requests_total", 'outcome="error"')
    return usage.ru_utime + usage.ru_stime, recorded, errors


def lag_at_rate(mock_port, rate, output_tokens, seconds, warmup=2.0):
    """Schedule-lag bucket counts (deltas after warm-up) and errors at `rate`."""
    port = free_port()
    path = write_config(port, mock_port, rate, output_tokens)
    proc = subprocess.Popen([BIN, "--log", "error", "probe", "--config", path], stdout=subprocess.DEVNULL)
    try:
        wait_ready(port)
        time.sleep(warmup)
        t0 = scrape(port)
        time.sleep(seconds)
        t1 = scrape(port)
    finally:
        proc.terminate(); proc.wait(); os.unlink(path)
    errors = total(t1, "llmprobe_requests_total", 'outcome="error"') - total(t0, "llmprobe_requests_total", 'outcome="error"')
    b0, b1 = lag_buckets(t0), lag_buckets(t1)
    return {le: b1[le] - b0.get(le, 0) for le in b1}, errors


def main():
    mock_port = free_port()
    mock = subprocess.Popen([BIN, "--log", "error", "mock", "--listen", f"127.0.0.1:{mock_port}", "--profile", "load-test"])
    try:
        wait_ready(mock_port, "/health")
        repeats, seconds = (1, 6) if QUICK else (3, 20)
        print(f"# prober CPU per 1,000 streamed requests (256 output tokens, rate 50/s for {seconds}s then drained, {repeats} runs; includes start-up)")
        per_k = []
        for _ in range(repeats):
            cpu, done, errors = cpu_per_request(mock_port, 50, 256, seconds)
            per_k.append(cpu / max(done, 1) * 1000)
            print(f"  run: {done} requests, {errors:.0f} errors, {cpu:.2f} s CPU -> {per_k[-1]:.3f} s per 1,000")
        print(f"cpu_seconds_per_1000_requests_median {statistics.median(per_k):.3f}")

        print("# highest Poisson rate with schedule lag p99 <= 1 ms (32 output tokens, 10 s per rate)")
        best = 0
        for rate in ([100, 400, 1600] if QUICK else [50, 100, 200, 400, 800, 1200, 1600, 2400, 3200]):
            lag, errors = lag_at_rate(mock_port, rate, 32, 10)
            n = lag.get("+Inf", 0)
            within = lag.get("0.001", 0) / n if n else 0
            ok = n > 0 and within >= 0.99
            print(f"  rate {rate:>5}/s: {n:.0f} sent, {errors:.0f} errors, lag <= 1 ms for {within*100:.2f}% -> {'holds' if ok else 'misses'}")
            if not ok:
                break
            best = rate
        print(f"max_rate_with_lag_p99_le_1ms {best}")
    finally:
        mock.terminate(); mock.wait()


main()
