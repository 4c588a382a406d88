# Usage (GPU machine): python3 scripts/gpu/stop_check.py BUNDLE_DIR/run PORT_WITH_OVERLAP PORT_WITHOUT (two df11d serving "m").
# Stop strings through df11d on CUDA, with host overlap (port A) and without (port B), same BF16 model:
# for each prompt, a greedy run without a stop, then a stop string taken from the middle of that text; both
# servers must give the same ids, text and finish reason, and the text must be the first run's text cut
# before the stop string.
import subprocess, sys
run, port_on, port_off = sys.argv[1], sys.argv[2], sys.argv[3]

def gen(port, prompt, stop=None):
    cmd = [run, "df11", "generate", "--addr", "127.0.0.1:" + port, "-m", "m", "-n", "48", "-t", "0", "--ignore-eos",
           "--show-ids", "--stats", "--tokens", prompt]
    if stop is not None:
        cmd += ["--stop", stop]
    p = subprocess.run(cmd, capture_output=True)
    return p.returncode, p.stdout, p.stderr

def parts(r):
    rc, out, err = r
    head, _, tail = err.partition(b"finish=")
    return rc, out, head, tail.split()[0] if tail else b""

ok = True
for prompt in ["1,2,3,4,5,6,7,8", "100,2000,30000,4000,500", "9999,8888,7777"]:
    rc, text, err = gen(port_on, prompt)
    full = text.decode("utf-8", "replace").rstrip("\n")
    third = len(full) // 3
    stop = full[third:third + 3]
    if rc != 0 or not stop.strip():
        print("prompt", prompt, "rc", rc, "no usable stop in", repr(full[:80])); ok = False; continue
    a = parts(gen(port_on, prompt, stop))
    b = parts(gen(port_off, prompt, stop))
    same = a == b
    cut = a[1].decode("utf-8", "replace").rstrip("\n") == full[:full.find(stop)]
    fin = a[3] == b"FINISH_REASON_STOP"
    print("prompt", prompt, "stop", repr(stop), "ids", a[2].count(b"["), "same on/off", same, "cut before stop", cut,
          "finish", a[3].decode())
    ok = ok and same and cut and fin
print("stop check", "PASSED" if ok else "FAILED")
