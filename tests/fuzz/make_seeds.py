#!/usr/bin/python3
"""Write the fuzz seed corpora under tests/fuzz/corpus/<target>/ (kept in git).

Every seed is a meaningful input: a valid request of every op, valid worker
reports, valid policies, valid plans, and msgpack values of every type. The
fuzzer mutates from there. Run it after a format changes; it rewrites the
corpus directories from scratch, so the output depends only on this file (and
packaging/policy.yaml). Needs Debian's python3-msgpack.
"""
import hashlib
import os
import shutil
import struct
import sys

import msgpack

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")


def pack(obj):
    return msgpack.packb(obj, use_bin_type=True)


CSV = "month,hours\n2024-01,9.0\n2024-02,7.5\n"


def requests():
    inv = "0123456789abcdef0123456789abcdef"
    code = ("measured_runtime_hours = [9.0, 7.5]\n"
            "sum(measured_runtime_hours) / len(measured_runtime_hours)\n")
    return {
        "hello": {"op": "hello", "id": 1},
        "status": {"op": "status", "id": 2},
        "invocation_open": {"op": "invocation.open", "id": 3},
        "invocation_close": {"op": "invocation.close", "id": 4, "invocation": inv},
        "source_put_read": {"op": "source.put", "id": 5, "invocation": inv, "sourceId": "runtimes",
                            "kind": "read_source", "text": CSV, "origin": "https://example.org/runtimes"},
        "source_put_attachment": {"op": "source.put", "id": 6, "invocation": inv, "sourceId": "wb.v2",
                                  "kind": "attachment", "text": CSV, "original": b"\x00\xffPK\x03\x04",
                                  "mediaType": "text/csv", "fileName": "wb.csv"},
        "execute": {"op": "execute", "id": 7, "summary": "mean", "code": code, "sourceIds": []},
        "execute_sources": {"op": "execute", "id": 8, "summary": "read", "invocation": inv,
                            "code": "open(input_files['runtimes']).read()", "sourceIds": ["runtimes", "wb.v2"]},
        "execute_unicode": {"op": "execute", "id": 9, "summary": "\u00e9t\u00e9",
                            "code": "print('\u00e9\u4e2d\U0001f600')", "sourceIds": []},
        "cancel": {"op": "cancel", "id": 10, "callId": 12345},
        "execute_keep": {"op": "execute", "id": 11, "summary": "clean", "invocation": inv,
                         "code": "open('/outputs/clean.csv', 'w').write('a')",
                         "sourceIds": ["out-1-raw.csv"], "keepOutputs": ["clean.csv", "plot.png"]},
        "execute_keep_all": {"op": "execute", "id": 12, "summary": "plot", "invocation": inv,
                             "code": "1", "sourceIds": [], "keepOutputs": "all"},
    }


def fitted(text, total_chars=None, total_bytes=None):
    b = text.encode()
    tc = len(text) if total_chars is None else total_chars
    tb = len(b) if total_bytes is None else total_bytes
    return {"text": text, "totalCharacters": tc, "totalBytes": tb,
            "omittedCharacters": tc - len(text), "omittedBytes": tb - len(b)}


def fit(text, ceiling=64):
    """The worker's fitting of an exception string: head and tail kept, the rest counted."""
    if len(text) <= ceiling:
        return fitted(text)
    head = ceiling - ceiling // 4
    kept = text[:head] + text[len(text) - (ceiling - head):]
    return fitted(kept, len(text), len(text.encode()))


def reports():
    tb = 'Traceback (most recent call last):\n  File "<code>", line 1, in <module>\nZeroDivisionError: division by zero\n'
    return {
        "setup_error": {"t": "setup", "stage": "mount_inputs", "errno": 13},
        "setup_python_init": {"t": "setup", "stage": "python_init", "errno": 12},
        "ready": {"t": "ready"},
        "done_value": {"t": "done", "hasResult": True, "limit": None, "exception": None},
        "done_none": {"t": "done", "hasResult": False, "limit": None, "exception": None},
        "done_memory": {"t": "done", "hasResult": False, "limit": "memory",
                        "exception": {"type": "MemoryError", "message": fitted(""), "traceback": fitted("")}},
        "done_file_size": {"t": "done", "hasResult": False, "limit": "file_size",
                           "exception": {"type": "OSError", "message": fitted("[Errno 27] File too large"),
                                         "traceback": fitted("OSError: [Errno 27] File too large\n")}},
        "done_processes": {"t": "done", "hasResult": False, "limit": "processes",
                           "exception": {"type": "RuntimeError", "message": fitted("can't start new thread"),
                                         "traceback": fitted("RuntimeError: can't start new thread\n")}},
        "done_exception": {"t": "done", "hasResult": False, "limit": None,
                           "exception": {"type": "ZeroDivisionError", "message": fitted("division by zero"),
                                         "traceback": fit(tb)}},
        # Fitted to the harness's ceiling of 64 characters: 36 kept, 200 omitted.
        "done_exception_fitted": {"t": "done", "hasResult": False, "limit": None,
                                  "exception": {"type": "ValueError",
                                                "message": fitted("\u00e9" * 20 + "x" * 16, 236, 256),
                                                "traceback": fitted("")}},
    }


def plan(code, inputs, deny_kill=False, outputs=True):
    return {"code": code, "uid": 65534, "gid": 65534, "memoryBytes": 536870912, "cpuSeconds": 30,
            "fileBytes": 16777216, "openFiles": 64, "processes": 16, "tmpBytes": 16777216, "outputs": outputs,
            "excCeiling": 64000, "denyKill": deny_kill, "inputs": inputs}


def plan_input(ident, kind, text, original=None, media_type=""):
    return {"id": ident, "kind": kind, "text": text, "original": original, "mediaType": media_type}


def plans():
    return {
        "plain": plan("1 + 1", []),
        "deny_kill": plan("import os\nos.getpid()", [], deny_kill=True),
        "no_outputs": plan("1", [], outputs=False),
        "read_source": plan("open(input_files['runtimes']).read()",
                            [plan_input("runtimes", "read_source", CSV.encode())]),
        "attachment": plan("open(input_files['wb']).read()",
                           [plan_input("wb", "attachment", CSV.encode(), b"\x00\xffPK\x03\x04", "text/csv")]),
        "output": plan("open(input_files['out-1-raw.csv']).read()",
                       [plan_input("out-1-raw.csv", "output", CSV.encode(), None, "text/csv")]),
        "four_inputs": plan("len(input_files)",
                            [plan_input("a", "read_source", b"1"), plan_input("b.v2", "attachment", b"2", b"\x02",
                                                                                "application/octet-stream"),
                             plan_input("c_c", "read_source", b""), plan_input("d-d", "attachment", b"", b"", "")]),
    }


POLICIES = {
    "minimal": "name: strict\nmaxCalls: 1\ntimeoutMs: 1000\n",
    "sandbox": ("memoryBytes: 268435456\ncpuSeconds: 5\nmaxFileBytes: 1048576\nmaxOpenFiles: 32\n"
                "maxProcesses: 4\ntmpBytes: 1048576\nworkerUid: 1000\nworkerGid: 1000\nseccompDenyAction: kill\n"),
    "peers": "allowedUids: [0, 1000]\nallowedGids:\n  - 1000\n  - 1001\nsocketGroup: root\n",
    "scheduler": ("maxActiveWorkers: 2\nmaxQueuedCalls: 0\nheartbeatMs: 250\nminAvailableMemoryBytes: 1073741824\n"
                  "workerStart: exec\nzygoteMaxCalls: 1\nzygoteMaxSeconds: 60\nzygotePoolSize: 0\n"),
    "empty_document": "# nothing set: the defaults\n",
    "flow": "{name: flow, maxCalls: 3, allowedUids: [5]}\n",
}


def mp_values():
    """msgpack values of every type and width, for mp_validate."""
    v = {
        "nil": None, "true": True, "false": False,
        "fixint": 7, "negfixint": -5, "uint8": 200, "uint16": 60000, "uint32": 4000000000,
        "uint64": 2**64 - 1, "int8": -100, "int16": -30000, "int32": -2000000000, "int64": -2**63,
        "float64": 1.5, "fixstr": "abc", "str8": "x" * 40, "str16": "y" * 300, "bin8": b"\x00\x01",
        "bin16": b"z" * 300, "fixarray": [1, [2, [3, [4]]]], "array16": list(range(20)),
        "fixmap": {"a": {"b": {"c": None}}}, "map16": {str(i): i for i in range(20)},
        "nested8": [[[[[[[[1]]]]]]]],
    }
    out = {k: pack(x) for k, x in v.items()}
    out["float32"] = b"\xca\x3f\xc0\x00\x00"
    out["str32"] = b"\xdb\x00\x00\x00\x02hi"
    out["bin32"] = b"\xc6\x00\x00\x00\x01\xff"
    out["array32"] = b"\xdd\x00\x00\x00\x02\xc0\xc3"
    out["map32"] = b"\xdf\x00\x00\x00\x01\xa1k\x01"
    for code, body in ((0xd4, 1), (0xd5, 2), (0xd6, 4), (0xd7, 8), (0xd8, 16)):
        out["fixext%d" % body] = bytes([code, 1]) + b"e" * body
    out["ext8"] = b"\xc7\x03\x05abc"
    out["ext16"] = b"\xc8\x00\x03\x05abc"
    out["ext32"] = b"\xc9\x00\x00\x00\x03\x05abc"
    out["timestamp"] = msgpack.packb(msgpack.Timestamp(1700000000, 5))
    return out


# Inputs that once broke a decoder, replayed by every run (docs/testing.md).
REGRESSIONS = {
    "fuzz_zygote": {
        # fuzz-smoke's find: an EXITING message (kind 6), which the validator accepted
        # before the target's oracle knew the kind.
        "regress-exiting-kind": bytes.fromhex("006f67797a06" + "00" * 43),
    },
    "fuzz_request": {
        # fuzz-smoke's find: two empty-string keys, one decoded with a NULL pointer, which
        # the duplicate-key check passed to memcmp (UBSan).
        "regress-empty-keys": bytes.fromhex(
            "89a0aa736f757265632e707574a0696406aa696e766f63adadadadadadadadadad"
            "adadadadadadadadadadadadadadadadadadadad1b52adad6b696e64adadadadad"
            "adadadadadadadadadad6f757265632e707574a269640652623576"),
    },
    "fuzz_plan": {
        # An array32 header declaring 2**32-1 elements: plan_decode() once let msgpack-c
        # allocate 128 GiB for it before anything checked the count.
        "regress-array32-header": b"\xdd\xff\xff\xff\xff",
        # The fuzzer's own find: a mutated plan whose inner count asked for 64 GiB.
        "regress-unvalidated-count": bytes.fromhex(
            "8ca4636f6465b5696d706f7274206f700000000000000005cdfffea3676964cdff"
            "feab6d656d6f72794279746573ce20000000aa6370752d5365636f6e64731ea966"
            "696c654279746e73ce01000000a96f70656e46696c657340a9703d6f6365737365"
            "7310a8746d704279746573ce01000000aa65780000000000000005dd634365696c"
            "696e67cdfa00a864656e794b6900a864656e794b696c6cc3a6696e7075747390"),
    },
}


def artifact(name, media_type, data):
    return {"name": name, "mediaType": media_type, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "data": data}


def result(artifacts, omitted=0, omitted_bytes=0, **extra):
    m = {"id": 7, "type": "result", "callId": 3, "outcome": "ok", "limit": None, "detail": None, "partial": False,
         "stdout": fitted("hi\n"), "stderr": fitted(""), "result": fitted("8.25"), "exception": None,
         "elapsedMs": 12, "artifacts": artifacts, "omittedArtifacts": omitted, "omittedArtifactBytes": omitted_bytes}
    m.update(extra)
    return m


def results():
    """Results and progress as clients decode them (fuzz_result): with artifacts, without
    /outputs, forged ones (a name that escapes, a wrong digest, a size that lies)."""
    png = b"\x89PNG\r\n\x1a\n" + bytes(24)
    forged = artifact("../up.txt", "text/plain", b"x")
    liar = dict(artifact("liar.bin", "application/octet-stream", b"abc"), bytes=1 << 40)
    wrong = dict(artifact("wrong.txt", "text/plain", b"abc"), sha256="0" * 64)
    return {
        "artifacts": result([artifact("a.csv", "text/csv", b"x,y\n1,2\n"), artifact("plot.png", "image/png", png)],
                            2, 4096),
        "no_outputs": result(None),
        "none_left": result([]),
        "forged": result([forged, liar, wrong, {"name": 5}, "not a map"], omitted=1 << 63),
        "error": {"id": 7, "type": "error", "code": "invalid_input", "message": "bad"},
        "progress": {"id": 7, "type": "progress", "callId": 3, "phase": "finished", "elapsedMs": 5,
                     "queuePosition": None, "stdoutCharacters": 3, "stderrCharacters": 0,
                     "stdoutOmittedCharacters": 0, "stderrOmittedCharacters": 0, "outcome": "ok",
                     "artifacts": 3, "artifactBytes": 12345},
    }


def zygote_msg(kind, token=0, uid=0, gid=0, error=0, pid=0, slot=0, n_cgroup_fds=0, n_fds=0, how=0, pages_ahead=0):
    """One fuzz_zygote input: the descriptor count, then a ZygoteMsg (little-endian, all
    48 bytes: contract/zygote_proto.h)."""
    return bytes([n_fds]) + struct.pack("<IIQIIiiIIII", 0x7a79676f, kind, token, uid, gid, error, pid, slot,
                                        n_cgroup_fds, how, pages_ahead)


def zygote_msgs():
    return {
        "ready": zygote_msg(1),
        "ready_pages_ahead": zygote_msg(1, pages_ahead=1124),
        "spawn": zygote_msg(2, token=1, uid=2146435072, gid=2146435072, n_fds=6),
        "spawn_cgroup_v1": zygote_msg(2, token=1, uid=2146435073, gid=2146435073, slot=1, n_cgroup_fds=2, n_fds=8),
        "slot": zygote_msg(5, uid=2146435074, gid=2146435074, slot=2),
        "slot_cgroup_v2": zygote_msg(5, uid=2146435075, gid=2146435075, slot=3, n_cgroup_fds=1, n_fds=1),
        # v1 with the CPU cap (cpuBandwidthPercent): memory, pids and cpu.
        "slot_cgroup_v1_cpu": zygote_msg(5, uid=2146435076, gid=2146435076, slot=5, n_cgroup_fds=3, n_fds=3),
        "spawn_cgroup_v1_cpu": zygote_msg(2, token=4, uid=2146435077, gid=2146435077, slot=6, n_cgroup_fds=3,
                                          n_fds=10),
        "slot_root": zygote_msg(5, uid=0, gid=0, slot=4),
        "spawned": zygote_msg(3, token=1, pid=4242, slot=1, n_fds=1, how=1),
        "spawned_preparing": zygote_msg(3, token=5, pid=4243, slot=2, n_fds=1, how=2),
        "spawned_eagain": zygote_msg(3, token=2, error=11, slot=2),
        "idle": zygote_msg(4),
        "exiting": zygote_msg(6),
        "negative_error": zygote_msg(3, token=3, error=-11),
        "short": zygote_msg(1)[:20],
    }


def write(target, seeds):
    d = os.path.join(CORPUS, target)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    seeds = dict(seeds, **REGRESSIONS.get(target, {}))
    for name, data in sorted(seeds.items()):
        if isinstance(data, str):
            data = data.encode()
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
    return len(seeds)


def main():
    reqs = {k: pack(v) for k, v in requests().items()}
    with open(os.path.join(ROOT, "packaging", "policy.yaml"), encoding="utf-8") as f:
        policies = dict(POLICIES, packaging=f.read())
    counts = {
        "fuzz_request": write("fuzz_request", reqs),
        "fuzz_report": write("fuzz_report", {k: pack(v) for k, v in reports().items()}),
        "fuzz_policy": write("fuzz_policy", policies),
        "fuzz_plan": write("fuzz_plan", {k: pack(v) for k, v in plans().items()}),
        "fuzz_zygote": write("fuzz_zygote", zygote_msgs()),
        "fuzz_result": write("fuzz_result", {k: pack(v) for k, v in results().items()}),
        "fuzz_mp": write("fuzz_mp", dict(mp_values(), **{"request_" + k: v for k, v in reqs.items()})),
    }
    for t, n in counts.items():
        print("%s: %d seeds" % (t, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
