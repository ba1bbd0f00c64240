#!/usr/bin/env python3
"""Second-turn latency of an agent loop on a local llama.cpp server (docs/models.md, "Prompt
caching"). Takes a tape of a two-turn run (vm/tests/real/tapes/count-lines.tape) and sends its
second request twice per round: right after the first (warm: the server's prompt cache holds the
stable prefix), and with a nonce put before the system prompt (cold: what a prefix that changes
from request to request, a run id or a time, would cost). Replies are held to 16 tokens so that
the prompt's share shows. Needs the server on 127.0.0.1:8088 (../shared/tools/local-llm.sh up).
Usage: python3 vm/tests/real/second-turn.py TAPE"""
import json, time, urllib.request, sys
tape = sys.argv[1]
lines = open(tape).read().splitlines()[1:]
t1 = json.loads(lines[0])["request"]; t2 = json.loads(lines[1])["request"]
def post(body):
    b = dict(body); b["stream"] = False; b.pop("stream_options", None)
    b["max_tokens"] = 16
    req = urllib.request.Request("http://127.0.0.1:8088/v1/chat/completions",
        data=json.dumps(b).encode(), headers={"content-type": "application/json", "authorization": "Bearer local"})
    start = time.time()
    r = json.load(urllib.request.urlopen(req, timeout=600))
    return time.time() - start, r.get("timings", {}), r["usage"]
for rep in range(3):
    post(t1); w, tw, uw = post(t2)
    # An unstable prefix: what a run id or a time at the start of the system prompt does.
    t2c = json.loads(json.dumps(t2)); t2c["messages"][0]["content"] = f"Run {time.time_ns()}. " + t2c["messages"][0]["content"]
    c, tc, uc = post(t2c)
    print(f"rep {rep}: warm {w:.2f}s (prompt_n {tw.get('prompt_n')} of {uw['prompt_tokens']}, {tw.get('prompt_ms',0):.0f} ms)  "
          f"cold {c:.2f}s (prompt_n {tc.get('prompt_n')} of {uc['prompt_tokens']}, {tc.get('prompt_ms',0):.0f} ms)")
