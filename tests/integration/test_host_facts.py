"""No host fact reaches a worker through what the zygote preloaded (docs/security.md,
"What a worker knows about its host").

The zygote imports the standard library's preload and, under the data policy, numpy,
pandas and matplotlib, in the host's UTS namespace and file system; a worker is forked
from it. Whatever that preload memoised about the host (platform.uname() names the host,
the C library read the host's /etc/localtime, matplotlib remembered the zygote's private
temporary directory) would be in every worker, whatever its own namespaces say.

Here the supervisor runs in a UTS namespace of its own with a distinctive host name and
in a mount namespace of its own where /etc/localtime names Asia/Tokyo (UTC+9, no summer
time). A worker must then say UTC for its time zone (exec mode's answer: a worker's
root has no /etc/localtime), `codeinterp` for every host name it is told, and hold
neither the host name nor the zygote's temporary directory in any object it can reach:
the probe walks every object the garbage collector tracks (containers, instances,
closures' cells), and compares every string and bytes value it holds."""
import ast
import os
import shutil

import pytest

from testlib import unavailable, value

pytestmark = [pytest.mark.start_mode, pytest.mark.python]

HOST_NAME = "hostfact-probe-%d" % os.getpid()
ZONE = "/usr/share/zoneinfo/Asia/Tokyo"
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DATA_POLICY = os.path.join(ROOT, "packaging", "policy-data.yaml")

# The supervisor's prefix: a UTS and a mount namespace of its own (private propagation,
# unshare's default), its host name set, and a copy of /etc (on a tmpfs that ends with
# the namespace) in which /etc/localtime names Asia/Tokyo. (A bind over /etc/localtime
# would land on the file its symlink names, inside /usr/share/zoneinfo.)
PREFIX = ["unshare", "--uts", "--mount", "--", "sh", "-c",
          'hostname "$0" && mount -t tmpfs -o mode=0755 tmpfs /mnt && cp -a /etc /mnt/etc && '
          'ln -sfn "$1" /mnt/etc/localtime && mount --bind /mnt/etc /etc && shift && exec "$@"', HOST_NAME, ZONE]

# The needles are given hex-encoded, so that the call's own source text (which the runner
# keeps for tracebacks) does not hold them; the decoded strings are skipped by identity.
PROBE = r"""
import gc, os, platform, socket, time, types
needles = [bytes.fromhex(h).decode() for h in %r]
found = set()
def values(o):
    if isinstance(o, dict):
        return list(o.keys()) + list(o.values())
    if isinstance(o, (list, tuple, set, frozenset)):
        return list(o)
    if isinstance(o, types.CellType):
        try:
            return [o.cell_contents]
        except ValueError:
            return []
    d = getattr(o, "__dict__", None)
    return list(d.values()) if isinstance(d, dict) else []
for o in gc.get_objects():
    if o is needles:
        continue
    for x in values(o):
        if isinstance(x, bytes):
            x = x.decode("latin-1")
        if not isinstance(x, str) or any(x is n for n in needles):
            continue
        for i, n in enumerate(needles):
            j = x.find(n)
            # The directory's prefix alone is the runner's own literal (a code object's
            # constants, which 3.13's collector tracks): only a name after it is a leak.
            if j >= 0 and (i == 0 or j + len(n) < len(x)):
                found.add((i, type(o).__name__))
t = time.localtime()
{"names": sorted({os.uname().nodename, socket.gethostname(), platform.node(), platform.uname().node}),
 "tzname": list(time.tzname), "gmtoff": t.tm_gmtoff, "timezone": time.timezone,
 "found": sorted(found)}
"""


def _require_tools():
    for tool in ("unshare", "hostname", "mount"):
        if not shutil.which(tool):
            unavailable("%s is not installed" % tool)
    if not os.path.exists(ZONE):
        unavailable("%s is missing (tzdata)" % ZONE)
    if os.geteuid() != 0:
        pytest.skip("the supervisor's own UTS and mount namespaces are made as root")


@pytest.mark.parametrize("profile", ["reviewed", "data"])
def test_a_worker_holds_no_fact_of_the_host_the_zygote_preloaded_on(make_supervisor, profile):
    _require_tools()
    policy = None
    if profile == "data":
        from test_datastack import require_stack
        require_stack()
        with open(DATA_POLICY) as f:
            policy = f.read()
    s = make_supervisor(policy, prefix=PREFIX)
    needles = [n.encode().hex() for n in (HOST_NAME, "codeinterp-mpl-")]
    c = s.connect()
    for _ in range(2):  # two calls: two workers
        r = c.execute(PROBE % (needles,))
        got = ast.literal_eval(value(r))
        assert got["names"] == ["codeinterp"], got
        assert (got["tzname"], got["gmtoff"], got["timezone"]) == (["UTC", "UTC"], 0, 0), got
        assert got["found"] == [], got
    c.close()
