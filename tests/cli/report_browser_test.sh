#!/usr/bin/env bash
# Loads report.html of `emo run` in headless Chromium and checks that
#  - the page loads with no console error or warning, no uncaught exception and no failed load (read
#    over the DevTools protocol; negative controls first prove that each kind is caught),
#  - the five charts are in the DOM with drawn content,
#  - a screenshot of the whole page is a real image.
# Chromium is required: scripts/install-deps.sh installs it. EMO_SKIP_BROWSER_TEST=1 skips the test.
# usage: report_browser_test.sh EMO_BINARY [SHARED_DIR]
set -euo pipefail
emo="$1"
if [[ "${EMO_SKIP_BROWSER_TEST:-}" == 1 ]]; then
  echo "SKIP: EMO_SKIP_BROWSER_TEST=1"
  exit 0
fi
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$browser" ]]; then
  echo "FAIL: chromium is not installed; scripts/install-deps.sh installs it (set EMO_SKIP_BROWSER_TEST=1 to skip this test)"
  exit 1
fi
command -v python3 >/dev/null || { echo "FAIL: python3 is needed (scripts/install-deps.sh installs it)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync)
# A fresh profile for every start, so no state carries over between pages.
profile_dir() { mktemp -d "$tmp/profile.XXXXXX"; }

# The console check: loads one page over the DevTools protocol (--remote-debugging-pipe) and prints
# every console message, uncaught exception and browser log entry; exits 1 if any is an error or a
# warning (or the page does not load), 0 otherwise. Last line: "page-size WIDTH HEIGHT".
cat >"$tmp/cdp.py" <<'PY'
# usage: cdp.py BROWSER URL USER_DATA_DIR
import fcntl, json, os, select, subprocess, sys, time

browser, url, user_dir = sys.argv[1:4]
to_chrome_r, to_chrome_w = os.pipe()
from_chrome_r, from_chrome_w = os.pipe()
# Out of the way of 3 and 4, where the child expects them (dup2 below clears close-on-exec there).
hi_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD_CLOEXEC, 20)
hi_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD_CLOEXEC, 20)
os.close(to_chrome_r); os.close(from_chrome_w)

def child_fds():
    os.dup2(hi_r, 3)
    os.dup2(hi_w, 4)

flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--user-data-dir=" + user_dir, "--remote-debugging-pipe", "about:blank"]
proc = subprocess.Popen([browser] + flags, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL, preexec_fn=child_fds, close_fds=False)
os.close(hi_r); os.close(hi_w)

buf = b""
next_id = 0
events = []  # (method, params) seen so far

def send(method, params=None, session=None):
    global next_id
    next_id += 1
    msg = {"id": next_id, "method": method, "params": params or {}}
    if session: msg["sessionId"] = session
    os.write(to_chrome_w, json.dumps(msg).encode() + b"\0")
    return next_id

def pump(deadline):
    """Reads what Chromium sent until the deadline; returns False once the pipe is closed."""
    global buf
    while True:
        left = deadline - time.monotonic()
        if left <= 0: return True
        ready, _, _ = select.select([from_chrome_r], [], [], left)
        if not ready: return True
        chunk = os.read(from_chrome_r, 1 << 16)
        if not chunk: return False
        buf += chunk
        while b"\0" in buf:
            raw, buf = buf.split(b"\0", 1)
            m = json.loads(raw)
            events.append(m)
        return True

def call(method, params=None, session=None, timeout=30):
    i = send(method, params, session)
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for m in events:
            if m.get("id") == i:
                events.remove(m)
                if "error" in m: sys.exit(f"cdp: {method}: {m['error']}")
                return m.get("result", {})
        if not pump(min(end, time.monotonic() + 0.2)): sys.exit("cdp: Chromium closed the pipe")
    sys.exit(f"cdp: no answer to {method}")

try:
    target = call("Target.createTarget", {"url": "about:blank"})["targetId"]
    sess = call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for dom in ("Runtime.enable", "Log.enable", "Page.enable"): call(dom, session=sess)
    events.clear()
    call("Page.navigate", {"url": url}, session=sess)
    end = time.monotonic() + 30
    while time.monotonic() < end and not any(m.get("method") == "Page.loadEventFired" for m in events):
        pump(min(end, time.monotonic() + 0.2))
    loaded = any(m.get("method") == "Page.loadEventFired" for m in events)
    pump(time.monotonic() + 1.0)  # late messages
    size = call("Runtime.evaluate", {"expression": "[document.documentElement.scrollWidth, document.documentElement.scrollHeight].join(' ')",
                                     "returnByValue": True}, session=sess)
    print("page-size", size.get("result", {}).get("value", "0 0"))
    bad = 0 if loaded else 1
    if not loaded: print("page did not finish loading in 30 s")
    for m in events:
        meth, p = m.get("method"), m.get("params", {})
        if meth == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            level = p.get("type")
            print(f"console.{level}: {text}")
            if level in ("error", "assert", "warning"): bad += 1
        elif meth == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            print("uncaught:", d.get("exception", {}).get("description", d.get("text")))
            bad += 1
        elif meth == "Log.entryAdded":
            e = p.get("entry", {})
            print(f"log.{e.get('level')} ({e.get('source')}): {e.get('text')} {e.get('url', '')}")
            if e.get("level") in ("error", "warning"): bad += 1
    try: call("Browser.close", timeout=5)
    except SystemExit: pass
finally:
    try: proc.wait(timeout=10)
    except subprocess.TimeoutExpired: proc.kill(); proc.wait()
sys.exit(1 if bad else 0)
PY
# console_check URL LOG: 0 when the page loads clean.
console_check() {
  local rc=0
  timeout 90 python3 "$tmp/cdp.py" "$browser" "$1" "$(profile_dir)" >"$2" 2>&1 || rc=$?
  return $rc
}

# ---- negative controls: each kind of problem must be caught, and a clean page must pass ----
cat >"$tmp/throw.html" <<'HTML'
<!DOCTYPE html><html><head><meta charset="utf-8"><title>t</title></head><body><p>x</p><script>throw new Error("x");</script></body></html>
HTML
cat >"$tmp/console-error.html" <<'HTML'
<!DOCTYPE html><html><head><meta charset="utf-8"><title>t</title></head><body><p>x</p><script>console.error("x");</script></body></html>
HTML
cat >"$tmp/missing-image.html" <<'HTML'
<!DOCTYPE html><html><head><meta charset="utf-8"><title>t</title></head><body><p>x</p><img src="no-such-image.png" alt=""></body></html>
HTML
cat >"$tmp/clean.html" <<'HTML'
<!DOCTYPE html><html><head><meta charset="utf-8"><title>t</title></head><body><p>x</p><script>console.log("fine");</script></body></html>
HTML
for page in throw console-error missing-image; do
  if console_check "file://$tmp/$page.html" "$tmp/$page.log"; then
    echo "FAIL: the console check missed the error in the negative control $page.html:"; sed 's/^/  | /' "$tmp/$page.log"
    exit 1
  fi
done
if ! console_check "file://$tmp/clean.html" "$tmp/clean.log"; then
  echo "FAIL: the console check rejects a clean page:"; sed 's/^/  | /' "$tmp/clean.log"
  exit 1
fi
echo "ok: console check catches an uncaught exception, console.error and a failed load, passes a clean page"

# ---- the real report ----
"$emo" synth train-dp --ranks 2 --layers 2 -o "$tmp/in" >/dev/null
"$emo" run "$tmp"/in/train-dp_rank*.json -o "$tmp/rep" >/dev/null
page="file://$tmp/rep/report.html"
if ! console_check "$page" "$tmp/report.log"; then
  echo "FAIL: report.html does not load clean:"; sed 's/^/  | /' "$tmp/report.log"
  exit 1
fi
echo "ok: report.html loads with no console errors"

dom=$(timeout 120 "$browser" "${flags[@]}" --user-data-dir="$(profile_dir)" --dump-dom "$page" 2>/dev/null)
for id in chart-tradeoff chart-timeline chart-critical-path chart-slack chart-profiling; do
  chart=$(printf '%s' "$dom" | tr '\n' ' ' | grep -o "<svg id=\"$id\".*" | sed 's#</svg>.*##' || true)
  if [[ -z "$chart" ]]; then echo "FAIL: $id missing from the rendered page"; exit 1; fi
  if ! grep -qE '<(rect|circle|path)' <<<"$chart"; then echo "FAIL: $id has nothing drawn"; exit 1; fi
done
echo "ok: five charts rendered"

# The whole page in one screenshot: the window as tall as the page (from the console check).
page_h=$(awk '$1 == "page-size" { h = $3 } END { print h + 0 }' "$tmp/report.log")
win_h=$(( page_h > 600 ? page_h + 40 : 1200 ))
timeout 120 "$browser" "${flags[@]}" --user-data-dir="$(profile_dir)" --hide-scrollbars --window-size=1100,"$win_h" \
  --screenshot="$tmp/report.png" "$page" >/dev/null 2>&1 || true
python3 - "$tmp/report.png" 1100 "$win_h" <<'PY'
import struct, sys, zlib
path, want_w, want_h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    data = open(path, "rb").read()
except OSError:
    sys.exit("FAIL: no screenshot written")
assert data[:8] == b"\x89PNG\r\n\x1a\n", "FAIL: the screenshot is not a PNG"
w, h = struct.unpack(">II", data[16:24])
assert (w, h) == (want_w, want_h), f"FAIL: screenshot is {w}x{h}, want {want_w}x{want_h}"
assert len(data) > 40_000, f"FAIL: screenshot is only {len(data)} bytes (a blank page?)"
# Not one flat color: the decoded scanlines must hold many distinct byte values.
idat, i = b"", 8
while i + 8 <= len(data):
    n, kind = struct.unpack(">I4s", data[i:i + 8])
    if kind == b"IDAT": idat += data[i + 8:i + 8 + n]
    i += 12 + n
raw = zlib.decompress(idat)
assert len(set(raw)) > 100, "FAIL: the screenshot is almost one color"
print(f"ok: screenshot {w}x{h}, {len(data)} bytes")
PY
if [[ -n "${EMO_KEEP_SCREENSHOT:-}" ]]; then cp "$tmp/report.png" "$EMO_KEEP_SCREENSHOT"; fi
