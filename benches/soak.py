"""Soak: the prober against a faulty mock for a long run, watching for leaks and lost probes.

Runs `llmprobe mock --profile load-test` with 10% of requests faulted, spread over every fault
kind, and `llmprobe probe` at a fixed Poisson rate, as separate processes on loopback. Every
`--sample` seconds it reads the prober's RSS and CPU time from /proc and its counters from
/metrics. At the end it prints RSS at start and end, the RSS slope (least squares over the run
after a warm-up, MiB per hour), CPU per request, scheduled vs recorded, and internal errors.

Usage: python3 benches/soak.py BIN [--minutes 30] [--rate 50] [--sample 30]
"""
import argparse, os, socket, subprocess, sys, tempfile, time, urllib.request

FAULTS = ["refuse", "close_before_response", "reset_mid_stream", "stall_ttft", "stall_mid_stream", "slow_drip",
          "http_429", "http_500", "http_503", "http_400", "error_in_stream", "empty_stream", "no_done",
          "malformed_json", "invalid_utf8", "oversized_frame", "wrong_content_type", "buffered",
          "multi_token_frames", "truncate_after_one", "gzip_stream"]
TICKS = os.sysconf("SC_CLK_TCK")


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICKS


def scrape(port):
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


def total(text, name, *labels):
    s = 0.0
    for line in text.splitlines():
        if (line.startswith(name + "{") or line.startswith(name + " ")) and all(l in line for l in labels):
            s += float(line.rsplit(" ", 1)[1])
    return s


def wait_ready(port):
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1); return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"nothing listening on {port}")


def slope_per_hour(points):
    n = len(points)
    if n < 2:
        return float("nan")
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return 3600 * sum((t - mt) * (v - mv) for t, v in points) / var if var else float("nan")


def seconds(text):
    """`90`, `90s`, `15m`, `2h` -> seconds."""
    text = text.strip()
    unit = {"s": 1, "m": 60, "h": 3600}.get(text[-1:], None)
    try:
        return float(text[:-1]) * unit if unit else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90s, 15m, 2h)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bin")
    ap.add_argument("--duration", type=seconds, help="run length (90s, 15m, 2h); overrides --minutes")
    ap.add_argument("--minutes", type=float, default=30)
    ap.add_argument("--rate", type=float, default=50)
    ap.add_argument("--sample", type=float, default=30)
    ap.add_argument("--warmup", type=seconds, help="left out of the RSS slope (default: 10 min, or a tenth of a shorter run)")
    ap.add_argument("--out", help="directory for samples.csv, the logs and summary.txt")
    a = ap.parse_args()
    if a.duration is not None:
        a.minutes = a.duration / 60
    warmup = a.warmup if a.warmup is not None else min(600.0, a.minutes * 6)
    out = a.out
    if out:
        os.makedirs(out, exist_ok=True)
    # The logs go to files, never to a pipe nobody reads until the end: a full pipe would block
    # the prober's logging and with it the run being measured.
    log_dir = out or tempfile.mkdtemp(prefix="soak-")
    mock_log = open(os.path.join(log_dir, "mock.log"), "w")
    prober_log = open(os.path.join(log_dir, "prober.log"), "w")
    csv = open(os.path.join(out, "samples.csv"), "w", buffering=1) if out else None
    if csv:
        csv.write("t_s,rss_mib,cpu_s,scheduled,recorded\n")
    mock_port, port = free_port(), free_port()
    fault_args = [x for k in FAULTS for x in ("--fault", f"{k}={0.10 / len(FAULTS):.4f}")]
    mock = subprocess.Popen([a.bin, "--log", "warn", "mock", "--listen", f"127.0.0.1:{mock_port}", "--profile", "load-test", *fault_args],
                            stdout=subprocess.DEVNULL, stderr=mock_log)
    cfg = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    cfg.write(f"""listen: 127.0.0.1:{port}
probe: {{rate: {a.rate}, seed: 11, max_in_flight: 2000, shutdown_grace: 30s}}
targets:
  - name: mock
    base_url: http://127.0.0.1:{mock_port}
    api: openai-chat
    model: mock-llama
    timeouts: {{connect: 2s, ttft: 5s, idle: 3s, total: 20s}}
scenarios:
  - {{name: short, weight: 3, input_tokens: 64, output_tokens: {{min: 16, max: 64}}}}
  - {{name: long, weight: 1, input_tokens: 512, output_tokens: 128}}
""")
    cfg.close()
    time.sleep(0.5)
    prober = subprocess.Popen([a.bin, "--log", "error", "probe", "--config", cfg.name], stdout=subprocess.DEVNULL, stderr=prober_log)
    wait_ready(port)
    start = time.time()
    samples = []
    end = start + a.minutes * 60
    while time.time() < end:
        t = time.time() - start
        samples.append((t, rss_mib(prober.pid), cpu_seconds(prober.pid)))
        if csv:
            try:
                m = scrape(port)
                sched, rec = total(m, "llmprobe_probes_scheduled_total"), total(m, "llmprobe_requests_total")
            except OSError:
                sched = rec = float("nan")
            csv.write(f"{t:.1f},{samples[-1][1]:.2f},{samples[-1][2]:.2f},{sched:.0f},{rec:.0f}\n")
        time.sleep(min(a.sample, max(0.1, end - time.time())))
    text = scrape(port)
    samples.append((time.time() - start, rss_mib(prober.pid), cpu_seconds(prober.pid)))
    prober.send_signal(15)
    _, status, usage = os.wait4(prober.pid, 0)
    prober_log.close()
    log = open(prober_log.name).read()
    mock.terminate(); mock.wait()
    scheduled = total(text, "llmprobe_probes_scheduled_total")
    recorded = total(text, "llmprobe_requests_total")
    in_flight = total(text, "llmprobe_in_flight_requests")
    internal = total(text, "llmprobe_internal_errors_total")
    internal_probes = total(text, "llmprobe_requests_total", 'error="internal"')
    errors = total(text, "llmprobe_requests_total", 'outcome="error"')
    cpu = usage.ru_utime + usage.ru_stime
    # The default panic hook writes "panicked at" once per panic, caught or not.
    panics = log.count("panicked at")
    # RSS slope after the warm-up (allocator pools, connection pool).
    warm = [(t, r) for t, r, _ in samples if t >= warmup]
    lines = [
        f"run                 {a.minutes:g} min at {a.rate:g} req/s, 10% faulted over {len(FAULTS)} fault kinds",
        f"rss_start_mib       {samples[0][1]:.1f}",
        f"rss_end_mib         {samples[-1][1]:.1f}",
        f"rss_max_mib         {max(r for _, r, _ in samples):.1f}",
        f"rss_slope_mib_per_h {slope_per_hour(warm):.2f}   (least squares over {len(warm)} samples after the first {warmup / 60:g} min)",
        f"cpu_seconds         {cpu:.1f}   ({1000 * cpu / max(recorded, 1):.2f} ms per request)",
        f"scheduled           {scheduled:.0f}",
        f"recorded            {recorded:.0f}   (+{in_flight:.0f} in flight at the last scrape; lost {scheduled - recorded - in_flight:.0f})",
        f"errors              {errors:.0f}   ({100 * errors / max(recorded, 1):.1f}% of recorded)",
        f"internal_errors     {internal:.0f}   (probes classified internal: {internal_probes:.0f})",
        f"panics              {panics}   (\"panicked at\" lines in the prober's log)",
        f"exit_status         {os.waitstatus_to_exitcode(status)}",
    ]
    print("\n".join(lines))
    if out:
        with open(os.path.join(out, "summary.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
    if "panicked" in log or "internal error" in log:
        print("log mentions a panic or an internal error:", file=sys.stderr)
        print(log[-4000:], file=sys.stderr)


if __name__ == "__main__":
    main()
