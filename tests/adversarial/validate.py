"""Validation mode: run every attempt OUTSIDE the sandbox and check that it escapes there,
proving that its predicate detects success. Each snippet runs in a subprocess of
/usr/bin/python3 with a timeout, in a throwaway temp dir, either as root on the host
("host") or under `unshare --user --map-root-user` with mount, uts, ipc and pid
namespaces ("userns"). Paths the snippet would damage point into the temp dir; pids it
signals belong to a dummy `sleep` started for it.

  /usr/bin/python3 tests/adversarial/validate.py [-j N] [ID_PREFIX...]

Exit status 0 when every validatable attempt escaped and no attempt listed as not
validatable did; prints the counts per category."""
import argparse
import collections
import concurrent.futures
import os
import shutil
import socket
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from attempts import ATTEMPTS  # noqa: E402

PY = "/usr/bin/python3"
USERNS = ["unshare", "--user", "--map-root-user", "--mount", "--uts", "--ipc", "--pid", "--fork"]
TIMEOUT = 30

# Runs pre (if any) and then the attempt in one interpreter with separate globals: what
# the sandbox must prevent is state crossing calls, here the interpreter is shared.
DRIVER = r'''
import os, sys
pre, code = sys.argv[1], sys.argv[2]
w3, w4 = map(int, sys.argv[3:5])
os.dup2(w3, 103)
os.dup2(w4, 104)
os.dup2(103, 3)
os.dup2(104, 4)
for fd in {w3, w4, 103, 104} - {3, 4}:
    os.close(fd)
g = {"__name__": "__main__"}
exec(compile(pre, "<pre>", "exec"), g)
exec(compile(code, "<code>", "exec"), {"__name__": "__main__"})
'''


def run_one(a, env_mode):
    d = tempfile.mkdtemp(prefix="codeinterp-adv-validate-")
    victim = subprocess.Popen(["sleep", "60"])
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    abstract = "codeinterp-adv-" + os.path.basename(d)
    alistener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    alistener.bind("\0" + abstract)
    alistener.listen(4)
    pipes = {}
    try:
        for sub in ("tmp", "host", "root", "lib", "inputs", "dev"):
            os.mkdir(os.path.join(d, sub))
        os.chmod(d, 0o755)
        host = os.path.join(d, "host")
        with open(os.path.join(host, "secret"), "w") as f:
            f.write("secret-value")
        with open(os.path.join(host, "target"), "w") as f:
            f.write("original")
        ro = os.path.join(d, "lib", "readonly.py")
        with open(ro, "w") as f:
            f.write("# read-only\n")
        os.chmod(ro, 0o444)
        sockpath = os.path.join(d, "ci.sock")
        ssock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ssock.bind(sockpath)
        ssock.listen(1)
        ctx = dict(tmp=os.path.join(d, "tmp"), host_dir=host, secret_file=os.path.join(host, "secret"),
                   secret="secret-value", target_file=os.path.join(host, "target"), ro_file=ro,
                   root_dir=os.path.join(d, "root"), lib_dir=os.path.join(d, "lib"),
                   inputs=os.path.join(d, "inputs"), dev_dir=os.path.join(d, "dev"),
                   victim_pid=victim.pid, supervisor_pid=victim.pid, env_name=harness.ENV_CANARY_NAME,
                   env_value="canary-" + harness.TOKEN, host_hostname=socket.gethostname(),
                   abstract=abstract, tcp_port=listener.getsockname()[1], socket_path=sockpath,
                   **LIMITS)
        code = harness.prelude(ctx) + "\n" + a.code
        pre = harness.prelude(ctx) + "\n" + (a.pre or "")
        # fds 3 and 4 are pipes, as in the worker; their bytes are counted.
        fds = {}
        for n in (3, 4):
            r, w = os.pipe()
            fds[n] = (r, w)
        env = dict(os.environ, **{harness.ENV_CANARY_NAME: ctx["env_value"]})
        argv = [PY, "-c", DRIVER, pre, code, str(fds[3][1]), str(fds[4][1])]
        if env_mode == "userns":
            argv = USERNS + argv

        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        # The driver moves the write ends onto 3 and 4.
        p = subprocess.Popen(argv, cwd=d, env=env, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w,
                             pass_fds=(fds[3][1], fds[4][1]))
        os.close(out_w)
        os.close(err_w)
        for n in (3, 4):
            os.close(fds[n][1])
        counts = collections.Counter()
        texts = {1: bytearray(), 2: bytearray()}
        readers = {out_r: 1, err_r: 2, fds[3][0]: 3, fds[4][0]: 4}
        pipes = dict(readers)
        import selectors
        sel = selectors.DefaultSelector()
        for fd in readers:
            sel.register(fd, selectors.EVENT_READ)
        import time
        deadline = time.monotonic() + TIMEOUT
        while readers and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=1):
                chunk = os.read(key.fd, 1 << 16)
                n = readers[key.fd]
                if not chunk:
                    sel.unregister(key.fd)
                    del readers[key.fd]
                    continue
                counts[n] += len(chunk)
                if n in texts and len(texts[n]) < 1 << 16:
                    texts[n] += chunk[:4096]
        try:
            rc = p.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        out = texts[1].decode(errors="replace") + texts[2].decode(errors="replace")
        if a.vpred == "marker":
            ok = harness.MARKER in out
        elif a.vpred == "signal":
            ok = rc < 0
        else:
            _, n, want = a.vpred
            ok = counts[n] >= want
        return ok, rc, out[-300:]
    finally:
        for fd in pipes:
            try:
                os.close(fd)
            except OSError:
                pass
        victim.kill()
        victim.wait()
        listener.close()
        alistener.close()
        subprocess.run(["chattr", "-R", "-i", d], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


# Attempts that need something of the host's kernel to escape outside the sandbox at
# all: the probe runs the same instructions plainly on the host; where they do not
# work there (a kernel or hypervisor without the i386 entry, say), the attempt cannot
# be validated here and is counted so, with the reason.
INT80_PROBE = r"""import ctypes, mmap, os
m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
m.write(b'\xb8\x14\x00\x00\x00\xcd\x80\xc3')  # mov eax,20 (i386 getpid); int 0x80; ret
r = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(m)))()
print('ok' if r == os.getpid() else 'returned %d' % r)
"""
HOST_NEEDS = {"py.shellcode_int80_i386": ("the i386 system call entry (int 0x80)", INT80_PROBE)}


def host_lacks(attempt):
    """Why attempt cannot escape even on this host (None when it can)."""
    need = HOST_NEEDS.get(attempt.id)
    if not need:
        return None
    p = subprocess.run([PY, "-I", "-c", need[1]], capture_output=True, text=True, timeout=TIMEOUT)
    if p.returncode == 0 and p.stdout.strip() == "ok":
        return None
    how = "killed by signal %d" % -p.returncode if p.returncode < 0 else (p.stdout.strip() or "exit %d" % p.returncode)
    return "this host does not offer %s: run plainly on the host, %s" % (need[0], how)


# Stand-ins for the adversarial supervisor's limits (test_adversarial.POLICY).
LIMITS = dict(cpu_s=2, timeout_s=5, mem=256 << 20, tmp_bytes=4 << 20, file_bytes=2 << 20, nofile=64, nproc=16)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("prefix", nargs="*")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("validate.py: run as root (the host validation runs the attempts as root)")
    chosen = [a for a in ATTEMPTS if not args.prefix or any(a.id.startswith(p) for p in args.prefix)]
    for i, a in enumerate(chosen):
        why = a.validate and host_lacks(a)
        if why:
            chosen[i] = a._replace(validate=None, why=why)
    results = {}
    with concurrent.futures.ThreadPoolExecutor(args.j) as ex:
        futs = {ex.submit(run_one, a, a.validate or "host"): a for a in chosen}
        for f in concurrent.futures.as_completed(futs):
            a = futs[f]
            try:
                results[a.id] = f.result()
            except Exception as e:  # a harness failure counts as not escaped
                results[a.id] = (False, None, "harness: %r" % e)
    per = collections.OrderedDict()
    bad = []
    for a in chosen:
        ok, rc, tail = results[a.id]
        c = per.setdefault(a.category, collections.Counter())
        c["attempts"] += 1
        if a.validate:
            c["validated" if ok else "FAILED"] += 1
            if not ok:
                bad.append("%s (%s): did not escape outside the sandbox; rc=%s: %s" % (a.id, a.validate, rc, tail.strip()))
        else:
            c["not validatable"] += 1
            if ok:
                bad.append("%s: listed as not validatable but escaped outside the sandbox" % a.id)
    total = collections.Counter()
    print("%-18s %8s %9s %15s %6s" % ("category", "attempts", "validated", "not validatable", "FAILED"))
    for cat, c in per.items():
        total.update(c)
        print("%-18s %8d %9d %15d %6d" % (cat, c["attempts"], c["validated"], c["not validatable"], c["FAILED"]))
    print("%-18s %8d %9d %15d %6d" % ("total", total["attempts"], total["validated"], total["not validatable"],
                                        total["FAILED"]))
    for a in chosen:
        if not a.validate:
            print("not validatable: %s: %s" % (a.id, a.why))
    for b in bad:
        print("FAIL: " + b)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
