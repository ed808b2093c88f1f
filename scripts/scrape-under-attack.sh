#!/usr/bin/env bash
# Scrapes the prober's /metrics once a second while hostile clients attack its HTTP server, and
# prints the share of scrapes answered. The prober runs on the mock with the release endpoint on
# (a token file), so the attack meets the real 401 path. The attack (python3 stdlib, asyncio):
#   - SLOW_BODY (128) unauthenticated POST /api/v1/releases heads with content-length 2 MB, then
#     a body byte every 5 s;
#   - IDLE (10,000) connections that never send a byte;
#   - SLOWLORIS (200) request heads that never finish (a header byte every 5 s);
#   - once at the start, FAST_POSTS (128) unauthenticated 2 MB POSTs sent in full (for RSS).
# Every attacker reconnects 1 s after the server closes it, so the pressure holds for the whole
# run. The scraper is a separate process: a new connection per scrape, 5 s timeout, every 1 s for
# DURATION (40) s. It also prints the prober's RSS before, at peak and after.
# Usage: scripts/scrape-under-attack.sh [path/to/llmprobe]   (env: IDLE, SLOW_BODY, SLOWLORIS,
# FAST_POSTS, DURATION). Needs ulimit -n above IDLE + SLOW_BODY + SLOWLORIS + a few hundred; the
# script raises the soft limit to the hard one and scales IDLE down (saying so) if that is short.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/debug/llmprobe}
IDLE=${IDLE:-10000} SLOW_BODY=${SLOW_BODY:-128} SLOWLORIS=${SLOWLORIS:-200} FAST_POSTS=${FAST_POSTS:-128} DURATION=${DURATION:-40}
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
limit=$(ulimit -n)
if [ "$limit" != unlimited ] && [ $((IDLE + SLOW_BODY + SLOWLORIS + 500)) -gt "$limit" ]; then
  IDLE=$((limit - SLOW_BODY - SLOWLORIS - 500))
  echo "ulimit -n is $limit: IDLE scaled down to $IDLE" >&2
fi
out=$(mktemp -d)
# Both ports picked together (scripts/free-ports.py says why).
read -r mock_port port <<<"$(scripts/free-ports.py 2 3)"
echo "attack-test-token" >"$out/token"
cat >"$out/config.yaml" <<YAML
listen: 127.0.0.1:$port
probe: {rate: 2, seed: 5}
targets:
  - {name: t, base_url: "http://127.0.0.1:$mock_port", api: openai-chat, model: mock-llama}
scenarios:
  - {name: s, input_tokens: 32, output_tokens: 8}
detect:
  release_token_file: $out/token
YAML
"$bin" mock --listen "127.0.0.1:$mock_port" --log warn >"$out/mock.log" 2>&1 &
mock_pid=$!
"$bin" probe --config "$out/config.yaml" --log warn >"$out/probe.log" 2>&1 &
pid=$!
trap 'kill $pid $mock_pid 2>/dev/null || true; wait $pid $mock_pid 2>/dev/null || true' EXIT

python3 - "$port" "$pid" "$IDLE" "$SLOW_BODY" "$SLOWLORIS" "$FAST_POSTS" "$DURATION" <<'PY'
import asyncio, subprocess, sys, time, urllib.request

port, pid, idle, slow_body, slowloris, fast_posts, duration = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
base = f"http://127.0.0.1:{port}"

def rss_mib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")

for _ in range(60):
    try:
        urllib.request.urlopen(base + "/healthz", timeout=2).read()
        break
    except OSError:
        time.sleep(0.5)
else:
    sys.exit("the prober did not come up")

# The scraper: its own process, so the attack's event loop cannot delay it.
SCRAPER = r'''
import sys, time, urllib.request
url, n = sys.argv[1], int(sys.argv[2])
ok = 0
for i in range(n):
    start = time.monotonic()
    try:
        body = urllib.request.urlopen(url, timeout=5).read()
        ok += b"llmprobe_" in body
        print(f"scrape {i}: ok {time.monotonic() - start:.3f} s", flush=True)
    except Exception as e:
        print(f"scrape {i}: FAILED {type(e).__name__}: {e}", flush=True)
    time.sleep(max(0.0, 1.0 - (time.monotonic() - start)))
print(f"answered {ok} of {n}", flush=True)
'''

stats = {"connects": 0, "closed": 0}
stop = False

async def attacker(head, trickle):
    """Connects, sends `head`, then a `trickle` byte every 5 s (None: nothing); reconnects 1 s after a close."""
    while not stop:
        try:
            r, w = await asyncio.open_connection("127.0.0.1", int(port))
            stats["connects"] += 1
            if head:
                w.write(head)
                await w.drain()
            while not stop:
                try:
                    await asyncio.wait_for(r.read(4096), 5)
                    if r.at_eof():
                        break
                except asyncio.TimeoutError:
                    if trickle is not None:
                        w.write(trickle)
                        await w.drain()
            w.close()
            stats["closed"] += 1
        except (OSError, ConnectionError):
            stats["closed"] += 1
        await asyncio.sleep(1)

async def fast_post():
    body = b"x" * 2_000_000
    try:
        r, w = await asyncio.open_connection("127.0.0.1", int(port))
        w.write(b"POST /api/v1/releases HTTP/1.1\r\nhost: x\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
        await asyncio.wait_for(w.drain(), 10)
        await asyncio.wait_for(r.read(4096), 10)
        w.close()
    except (OSError, ConnectionError, asyncio.TimeoutError):
        pass

async def main():
    global stop
    before = rss_mib()
    await asyncio.gather(*(fast_post() for _ in range(fast_posts)))
    after_posts = rss_mib()
    post_head = b"POST /api/v1/releases HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2000000\r\n\r\n"
    tasks = [asyncio.create_task(attacker(post_head, b"{")) for _ in range(slow_body)]
    tasks += [asyncio.create_task(attacker(b"GET /metrics HTTP/1.1\r\nhost: x\r\n", b"x")) for _ in range(slowloris)]
    for i in range(idle):
        tasks.append(asyncio.create_task(attacker(None, None)))
        if i % 500 == 499:
            await asyncio.sleep(0)  # let the connects start without one giant burst of tasks
    await asyncio.sleep(2)
    scraper = await asyncio.create_subprocess_exec(sys.executable, "-c", SCRAPER, base + "/metrics", str(duration), stdout=asyncio.subprocess.PIPE)
    peak = rss_mib()
    lines = []
    async def watch_rss():
        nonlocal peak
        while True:
            peak = max(peak, rss_mib())
            await asyncio.sleep(1)
    watcher = asyncio.create_task(watch_rss())
    async for line in scraper.stdout:
        lines.append(line.decode().rstrip())
    await scraper.wait()
    watcher.cancel()
    stop = True
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await asyncio.sleep(2)
    for l in lines[:-1]:
        if "FAILED" in l:
            print(l)
    print(f"attack: {idle} idle, {slow_body} slow-body uploads, {slowloris} slowloris heads, {fast_posts} 2 MB POSTs once; "
          f"{stats['connects']} connections opened, {stats['closed']} closed by the server or failed")
    print(f"prober RSS: {before:.0f} MiB before, {after_posts:.0f} MiB after the 2 MB POSTs, {peak:.0f} MiB peak under attack, {rss_mib():.0f} MiB after")
    load = open("/proc/loadavg").read().split()[:3]
    print(f"load average during the run: {' '.join(load)} on {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores")
    took = sorted(float(l.split()[3]) for l in lines if ": ok " in l)
    times = f"; answer time median {took[len(took) // 2]:.3f} s, max {took[-1]:.3f} s" if took else ""
    print(f"scrapes {lines[-1] if lines else 'none'} ({duration} s, one a second, 5 s timeout, new connection each){times}")

asyncio.run(main())
PY
