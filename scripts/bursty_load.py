"""Open-arrival background load whose rate swings: the log rate is an Ornstein-Uhlenbeck
process (sd `sd`, time constant `tau_s`) around `rate` requests/s, each request a chat
completion with a prompt of `words` random words, sent to every base URL in `base_urls` (two
engines side by side share the same arrivals). Used by the release and gate drills and the
reading calibration (`import bursty_load`); stops with the `stop` event."""
import json
import math
import random
import threading
import time
import urllib.request


def start(base_urls, model, stop, rate=6.0, sd=0.5, tau_s=60.0, words=600, max_tokens=48, seed=11):
    rng = random.Random(seed)

    def request(base_url, body):
        try:
            urllib.request.urlopen(urllib.request.Request(base_url + "/v1/chat/completions", body, {"content-type": "application/json"}), timeout=120).read()
        except Exception:
            pass

    def load():
        x, last = 0.0, time.time()
        while not stop.is_set():
            now = time.time()
            a = math.exp(-(now - last) / tau_s)
            x = x * a + sd * math.sqrt(1 - a * a) * rng.gauss(0, 1)
            last = now
            time.sleep(rng.expovariate(rate * math.exp(x)))
            prompt = " ".join("w%d" % rng.randrange(10**6) for _ in range(words))
            body = json.dumps({"model": model, "max_tokens": max_tokens, "messages": [{"role": "user", "content": prompt}]}).encode()
            for base_url in base_urls:
                threading.Thread(target=request, args=(base_url, body), daemon=True).start()

    threading.Thread(target=load, daemon=True).start()
