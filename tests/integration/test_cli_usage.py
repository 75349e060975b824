"""The codeinterp command's usage: every subcommand's --help (and -h), connection errors
that name the socket, and the number of sources a call may name (the command, the
supervisor and docs/client.md agree)."""
import os
import re
import subprocess

import pytest

from codeinterp import InvalidInput
from testlib import CLIENT, WAIT_LIMIT
from testlib.env import SOURCE_ROOT

NO_SOCKET = "/nonexistent/ci.sock"


def cli(*args):
    return subprocess.run([CLIENT, "--socket", NO_SOCKET] + list(args), capture_output=True, text=True,
                          timeout=WAIT_LIMIT)


def global_help():
    out = cli("--help")
    assert out.returncode == 0, out
    return out.stdout


def subcommands():
    """{command: the text of its lines in codeinterp --help}, from the Commands section."""
    text = global_help()
    body = text[text.index("Commands:\n") + len("Commands:\n"):text.index("\n\n", text.index("Commands:\n"))]
    out, cmd = {}, None
    for line in body.split("\n"):
        m = re.match(r"  ([a-z]+)\b", line)
        if m:
            cmd = m.group(1)
            out[cmd] = ""
        out[cmd] += line + "\n"
    return out


def options(text):
    return set(re.findall(r"(?<![\w-])--([a-z][a-z-]*)", text))


def test_the_help_lists_every_subcommand():
    assert set(subcommands()) == {"exec", "tool", "mcp", "replay", "hello", "describe", "status"}


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_every_subcommand_prints_its_own_usage(flag):
    """`codeinterp CMD --help` prints CMD's usage (naming every option codeinterp --help
    lists for it) on stdout and exits 0, without connecting (the socket does not exist)."""
    whole = global_help()
    for cmd, lines in subcommands().items():
        out = cli(cmd, flag)
        assert out.returncode == 0 and out.stderr == "", (cmd, out)
        first = out.stdout.split("\n")[0]
        assert first.startswith("Usage: codeinterp") and re.search(r"\b%s\b" % cmd, first), (cmd, first)
        assert out.stdout != whole, "%s %s printed the whole help" % (cmd, flag)
        assert options(lines) <= options(out.stdout), (cmd, options(lines) - options(out.stdout))


@pytest.mark.parametrize("args", [["hello"], ["describe"], ["status"], ["status", "--ready"], ["exec", "-c", "1"],
                                  ["tool"]])
def test_connection_errors_name_the_socket(args):
    out = cli(*args)
    assert out.returncode == 12, out
    assert "cannot connect to the supervisor at %s: No such file or directory" % NO_SOCKET in out.stderr, out


def test_source_count_agrees(shared_supervisor, tmp_path):
    """A call names at most hello's maxSourceIds sources: exec refuses one more
    --source/--attach as a usage error before connecting, the supervisor refuses an
    execute naming one more with invalid_input, and docs/client.md says that number."""
    sup = shared_supervisor()
    client = sup.client()
    n = client.hello().limits.max_source_ids
    f = tmp_path / "s.txt"
    f.write_text("x")
    mounts = sum((["--source", "s%d=%s" % (i, f)] for i in range(n + 1)), [])
    out = cli("exec", *mounts, "-c", "1")
    assert out.returncode == 2 and "at most %d --source/--attach per call" % n in out.stderr, out
    ok = subprocess.run([CLIENT, "--socket", sup.socket, "exec", *mounts[:2 * n], "-c", "len(input_files)"],
                        capture_output=True, text=True, timeout=WAIT_LIMIT)
    assert ok.returncode == 0 and ok.stdout == "%d\n" % n, ok
    with client.invocation() as inv:
        for i in range(n + 1):
            inv.put_source("s%d" % i, "x")
        with pytest.raises(InvalidInput, match="%d source IDs, at most %d are allowed" % (n + 1, n)):
            inv.execute("1", "one source too many", ["s%d" % i for i in range(n + 1)])
    with open(os.path.join(SOURCE_ROOT, "docs", "client.md")) as doc:
        md = doc.read()
    said = re.search(r"accepts up to (\d+) `--source`/`--attach` options", md)
    assert said and int(said.group(1)) == n, "docs/client.md's exec section: the number of sources"
    assert "refuses an `execute` naming more with `invalid_input`" in md
