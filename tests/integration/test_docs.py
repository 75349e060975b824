"""The docs against the tree, for the facts that drift when the code changes and the
docs do not: the policy keys (policy/policy.c against docs/policy.md and
packaging/policy.yaml), the outcomes (supervisor/outcome.h against docs/protocol.md,
the command's exit statuses), the command-line options (each program's --help against
its option tables in the source, docs/man and docs/), the embedded Python version
(BUILD/python.json against every place the docs name it) and the files of the tree
the README and docs/ name. Each check reads both sides
and fails naming what differs; none needs a supervisor."""
import glob
import json
import os
import re
import subprocess

import pytest
import yaml

from testlib import BUILD, DAEMON

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
CLI = os.path.join(BUILD, "bin", "codeinterp")


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def section(text, heading):
    """The lines under the Markdown heading (exactly that line) up to the next heading
    of the same or a higher level."""
    level = len(heading) - len(heading.lstrip("#"))
    lines = text.split("\n")
    start = lines.index(heading) + 1
    for i in range(start, len(lines)):
        m = re.match(r"(#+) ", lines[i])
        if m and len(m.group(1)) <= level and not in_fence(lines, i):
            return "\n".join(lines[start:i])
    return "\n".join(lines[start:])


def in_fence(lines, i):
    return sum(1 for line in lines[:i] if line.startswith("```")) % 2 == 1


def strip_c_comments(src):
    return re.sub(r"/\*.*?\*/", " ", src, flags=re.S)


def split_args(s):
    """The top-level comma-separated arguments of a C macro call's argument text."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    out.append(cur.strip())
    return out


def balanced(src, open_at):
    """The text between the parenthesis at open_at and its match."""
    depth = 0
    for i in range(open_at, len(src)):
        depth += src[i] == "("
        depth -= src[i] == ")"
        if depth == 0:
            return src[open_at + 1:i]
    raise AssertionError("unbalanced parentheses at %d" % open_at)


# ---- policy keys ------------------------------------------------------------------

def c_defines(*rels):
    out = {}
    for rel in rels:
        for name, value in re.findall(r"^#define (\w+) (0x[0-9A-Fa-f]+|\d+)U?\b", read(rel), re.M):
            out[name] = int(value, 0)
    return out


def c_eval(expr, defines):
    """A policy.c bound (`MIB(16)`, `UINT32_MAX - 1`, `POLICY_NAME_MAX - 1`...) as an int."""
    e = re.sub(r"UINT64_C\((\d+)\)", r"\1", expr)
    e = re.sub(r"MIB\((\d+)\)", r"(\1 * 1048576)", e)
    e = re.sub(r"GIB\((\d+)\)", r"(\1 * 1073741824)", e)
    e = e.replace("BYTES_1T", str(1 << 40)).replace("UINT32_MAX", str((1 << 32) - 1))
    e = re.sub(r"\b[A-Z_][A-Z0-9_]*\b", lambda m: str(defines[m.group(0)]), e)
    assert re.fullmatch(r"[\d\s+*()-]+", e), (expr, e)
    return eval(e)  # digits and + - * ( ) only, checked above


def policy_keys_in_c():
    """{key: (KeyType, min, max)} from the loader's table in policy/policy.c."""
    src = strip_c_comments(read("policy/policy.c"))
    m = re.search(r"static const KeyDef keys\[_K_MAX\] = \{(.*?)\n\};", src, re.S)
    assert m, "policy/policy.c: the keys[] table was not found"
    table, base = m.group(1), m.start(1)
    defines = c_defines("policy/policy.h")
    keys = {}
    for d in re.finditer(r"\b(?:DEF|LIMIT|RESTART|RESTART_LIMIT)\(", table):
        args = split_args(balanced(src, base + d.end() - 1))
        assert len(args) == 6 and re.fullmatch(r'"\w+"', args[1]), args
        key = args[1].strip('"')
        assert key not in keys, "policy.c defines %s twice" % key
        keys[key] = (args[2], c_eval(args[4], defines), c_eval(args[5], defines))
    assert len(keys) > 30, keys  # the parse reads what it thinks it reads
    return keys


def policy_keys_in_docs():
    """{key: {"type", "default", "range"}} from the tables of docs/policy.md's "Keys"."""
    lines = section(read("docs/policy.md"), "## Keys").split("\n")
    keys = {}
    for i, line in enumerate(lines):
        if not line.startswith("| Key |"):
            continue
        head = [c.strip() for c in line.strip("|").split("|")]
        assert head[:4] == ["Key", "Type", "Default", "Range"], head
        for row in lines[i + 2:]:
            if not row.startswith("|"):
                break
            cells = [c.strip() for c in row.strip().strip("|").split("|")]
            m = re.fullmatch(r"`(\w+)`", cells[0])
            assert m, "docs/policy.md: a key table row that names no key: %s" % row
            assert m.group(1) not in keys, "docs/policy.md documents %s twice" % m.group(1)
            keys[m.group(1)] = dict(zip(("type", "default", "range"), cells[1:4]))
    return keys


UNITS = {"": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
DOC_BOUND = r"(\d+)(?: (KiB|MiB|GiB|TiB))?"


def doc_range(text, prefix=""):
    m = re.match(prefix + DOC_BOUND + "–" + DOC_BOUND, text)
    if not m:
        return None
    lo, lo_unit, hi, hi_unit = m.groups()
    return int(lo) * UNITS[lo_unit or ""], int(hi) * UNITS[hi_unit or ""]


def test_policy_keys_match_the_loader():
    """Every key policy.c accepts is in docs/policy.md and no documented key is unknown."""
    c, docs = policy_keys_in_c(), policy_keys_in_docs()
    assert sorted(set(c) - set(docs)) == [], "accepted by policy/policy.c, not in docs/policy.md"
    assert sorted(set(docs) - set(c)) == [], "in docs/policy.md, unknown to policy/policy.c"


def test_policy_types_and_ranges_match_the_loader():
    c, docs = policy_keys_in_c(), policy_keys_in_docs()
    wrong = []
    for key, (ktype, lo, hi) in sorted(c.items()):
        if key not in docs:
            continue  # test_policy_keys_match_the_loader says so
        d = docs[key]
        want = {"KEY_U32": "integer", "KEY_U64": "integer", "KEY_UID_LIST": "list of integers",
                "KEY_GID_LIST": "list of integers"}.get(ktype)
        if want and d["type"] != want:
            wrong.append("%s: type %r, policy.c has %s (%r)" % (key, d["type"], ktype, want))
        prefix = {"KEY_U32": "", "KEY_U64": "", "KEY_NAME": "", "KEY_UID_LIST": r".*?each ",
                  "KEY_GID_LIST": r".*?each ", "KEY_GROUP": r".*?gid "}.get(ktype)
        if prefix is None:
            continue  # an enumeration or the package list: no numeric range
        got = doc_range(d["range"], prefix)
        if got != (lo, hi):
            wrong.append("%s: docs say range %r, policy.c has %d–%d" % (key, d["range"], lo, hi))
    assert not wrong, "\n".join(wrong)


def test_policy_defaults_match_the_packaged_file():
    """docs/policy.md's defaults are packaging/policy.yaml's values (which test_policy.c's
    test_packaging_file ties to the built-in defaults); a key the file leaves commented
    out is "unset"."""
    c, docs = policy_keys_in_c(), policy_keys_in_docs()
    text = read("packaging/policy.yaml")
    values = yaml.safe_load(text)
    commented = {k for k in re.findall(r"^#\s*(\w+):", text, re.M) if k in c}
    assert sorted(set(c) - set(values) - commented) == [], "keys packaging/policy.yaml does not list"
    wrong = []
    for key, d in sorted(docs.items()):
        if key in commented and key not in values:
            ok = d["default"] == "unset"
            want = "unset"
        elif isinstance(values.get(key), bool) or key not in values:
            ok, want = False, repr(values.get(key))
        elif isinstance(values[key], int):
            ok = re.match(r"%d\b" % values[key], d["default"]) is not None
            want = str(values[key])
        else:
            want = "`%s`" % (json.dumps(values[key]) if isinstance(values[key], list) else values[key])
            ok = d["default"] == want
        if not ok:
            wrong.append("%s: docs/policy.md says default %r, packaging/policy.yaml %s" % (key, d["default"], want))
    assert not wrong, "\n".join(wrong)


def test_python_packages_allow_list_matches_the_loader():
    names = re.findall(r'\[POLICY_PACKAGE_\w+\] = "(\w+)"', read("policy/policy.c"))
    assert len(names) >= 3, names
    documented = re.findall(r"`(\w+)`", policy_keys_in_docs()["pythonPackages"]["range"])
    assert documented == names, "docs/policy.md's pythonPackages allow-list vs policy.c's package names"


# ---- outcomes -----------------------------------------------------------------------

def outcomes_in_c():
    enum = re.search(r"typedef enum Outcome \{(.*?)\} Outcome;", strip_c_comments(read("supervisor/outcome.h")), re.S)
    assert enum, "supervisor/outcome.h: enum Outcome not found"
    names = [n.lower() for n in re.findall(r"\bOUTCOME_(\w+)", enum.group(1))]
    assert len(names) >= 10, names
    wire = dict(re.findall(r'\[OUTCOME_(\w+)\] = "(\w+)"', read("supervisor/protocol.c")))
    assert {k.lower(): v for k, v in wire.items()} == {n: n for n in names}, "protocol.c's outcome_names"
    return names


def test_outcomes_documented_in_protocol_md():
    """docs/protocol.md's Outcomes table is the closed set, in hello's (the enum's) order."""
    table = re.findall(r"^\| `(\w+)` \|", section(read("docs/protocol.md"), "## Outcomes"), re.M)
    assert table == outcomes_in_c()


def test_every_outcome_has_an_exit_status():
    """codeinterp's exit statuses name every outcome: in --help, docs/client.md and the man page."""
    outcomes = outcomes_in_c()
    help_text = subprocess.run([CLI, "--help"], capture_output=True, text=True, check=True).stdout
    exit_help = help_text[help_text.index("Exit status:"):]
    exit_md = section(read("docs/client.md"), "### Exit status")
    man = read("docs/man/codeinterp.1")
    exit_man = man[man.index(".SH EXIT STATUS"):man.index(".SH", man.index(".SH EXIT STATUS") + 1)]
    for where, text in (("codeinterp --help", exit_help), ("docs/client.md", exit_md),
                        ("docs/man/codeinterp.1", exit_man)):
        missing = [o for o in outcomes if not re.search(r"(?<![\w-])%s(?![\w-])" % o, text)]
        assert missing == [], "%s: the exit statuses do not name %s" % (where, missing)


# ---- command-line options -----------------------------------------------------------

def run_help(binary):
    return subprocess.run([binary, "--help"], capture_output=True, text=True, check=True).stdout


def getopt_names(src, function):
    """The long options of the struct option table in the C function named function."""
    body = src[src.index(function + "("):]
    body = body[:body.index("\n}\n")]
    m = re.search(r"struct option \w+\[\] = \{(.*?)\};", body, re.S)
    assert m, "%s has no struct option table" % function
    return set(re.findall(r'\{ "([a-z][a-z-]*)",', m.group(1)))


def daemon_options_in_code():
    return getopt_names(read("supervisor/main.c"), "static int parse_argv")


def help_options(text):
    return set(re.findall(r"(?<![\w-])--([a-z][a-z-]*)", text))


# The client's commands and the C function that parses each one's options (None: the
# global options, parsed in main). A new struct option table elsewhere fails the test.
CLIENT_PARSERS = {None: ("client/codeinterp.c", "int main"), "exec": ("client/exec.c", "static int exec_parse_argv"),
                  "tool": ("client/tool.c", "int tool_main"), "mcp": ("client/mcp_main.c", "int mcp_main"),
                  "replay": ("client/replay.c", "int replay_main")}


def client_options_in_code():
    out = {}
    for cmd, (rel, function) in CLIENT_PARSERS.items():
        out[cmd] = getopt_names(read(rel), function) - {"help"}
    tables = sum(len(re.findall(r"struct option \w+\[\]", read(p))) for p in glob.glob(os.path.join(ROOT, "client/*.c")))
    assert tables == len(CLIENT_PARSERS), "a struct option table this test does not know: add it to CLIENT_PARSERS"
    # status takes one flag, matched by hand in main.
    status = re.search(r"NameValue hows\[\] = \{(.*?)\};", read("client/codeinterp.c"), re.S)
    assert status, "client/codeinterp.c: status's flags (hows[]) not found"
    out["status"] = set(re.findall(r'\{ "--([a-z-]+)",', status.group(1)))
    return out


def client_options_in_help():
    """{command: options} from codeinterp --help: a command's own line (its synopsis,
    before the description) and the "      --option" lines under it; None: the global
    options after the commands."""
    text = run_help(CLI)
    body = text[text.index("Commands:\n") + len("Commands:\n"):text.index("\nExit status:")]
    out, cmd = {None: set()}, None
    for line in body.split("\n"):
        m = re.match(r"  ([a-z]+)\b(.*)", line)
        if m:
            cmd = m.group(1)
            out[cmd] = help_options(re.split(r"\s{2,}", m.group(2).strip())[0])
        elif re.match(r"      --", line):
            out[cmd] |= help_options(line.split()[0])
        elif line == "":
            cmd = None
        elif re.match(r"  (-\w, )?--", line):
            out[None] |= help_options(line.strip().split("  ")[0]) - {"help"}
    return {k: v for k, v in out.items() if v or k in CLIENT_PARSERS}


def test_daemon_help_matches_its_options():
    assert help_options(run_help(DAEMON)) == daemon_options_in_code()


def test_daemon_options_documented():
    """Every codeinterpd option is an item of the man page's OPTIONS and a row of
    operations.md's option table, and neither has one codeinterpd does not take."""
    opts = daemon_options_in_code()
    man = read("docs/man/codeinterpd.8")
    man_opts = man[man.index(".SH OPTIONS"):man.index(".SH", man.index(".SH OPTIONS") + 1)]
    items = set(re.findall(r"^\.TP\n\.B[IR]? (?:\\-\w\s*,\s*)?\\-\\-([a-z\\-]+)", man_opts.replace('"', ""), re.M))
    items = {i.replace("\\-", "-").replace("\\", "") for i in items}
    assert items == opts, "docs/man/codeinterpd.8 OPTIONS"
    assert {o.replace("\\-", "-") for o in re.findall(r"\\-\\-([a-z]+(?:\\-[a-z]+)*)", man)} <= opts
    table = section(read("docs/operations.md"), "## codeinterpd")
    rows = set(re.findall(r"^\| (?:`-\w`, )?`--([a-z-]+)", table, re.M))
    assert rows == opts, "docs/operations.md's codeinterpd option table"
    synopsis = table[table.index("```") + 3:table.index("```", table.index("```") + 3)]
    assert help_options(synopsis) <= opts


def test_client_help_matches_its_options():
    """Each command's options in codeinterp --help are the ones its parser takes."""
    assert client_options_in_help() == client_options_in_code()


def test_client_options_documented():
    """Each codeinterp option is in the man page, and in docs/client.md's section of its
    command; the man page names no option the command does not take."""
    code = client_options_in_code()
    every = set().union(*code.values()) | {"help"}
    man = read("docs/man/codeinterp.1").replace("\\-", "-").replace('"', "")
    assert set(re.findall(r"(?<![\w-])--([a-z][a-z-]*)", man)) == every, "docs/man/codeinterp.1"
    # The global and exec options are items (.TP) of their own; the others are named
    # in their command's item.
    items = set(re.findall(r"^\.TP\n\.B[IR]? (?:-\w\s*,\s*)?--([a-z][a-z-]*)", man, re.M))
    assert code[None] | code["exec"] <= items, "docs/man/codeinterp.1: global and exec options without an item"
    md = read("docs/client.md")
    sections = {None: section(md, "## codeinterp").split("\n### ")[0]}
    for cmd in code:
        if cmd is not None:
            heading = next(h for h in re.findall(r"^### codeinterp .*$", md, re.M)
                           if re.search(r"\bcodeinterp %s\b" % cmd, h))
            sections[cmd] = section(md, heading)
    missing = ["%s --%s" % (cmd or "codeinterp", o) for cmd, opts in sorted(code.items(), key=str)
               for o in sorted(opts) if o not in help_options(sections[cmd])]
    assert missing == [], "options docs/client.md's section of their command does not name"


# ---- the embedded Python ------------------------------------------------------------

DOCS = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))


def python_facts():
    with open(os.path.join(BUILD, "python.json")) as f:
        facts = json.load(f)
    if facts["interpreter"] != "/usr/bin/python3":
        pytest.skip("the docs describe the default build (Debian's /usr/bin/python3), not %s" % facts["interpreter"])
    return facts


# Where the docs name the default build's CPython: (pattern, which form it must equal).
PYTHON_NAMED = [
    (r"Debian(?: 12)?'s\s+(?:CPython\s+|Python\s+|python3\s+)?(\d+\.\d+(?:\.\d+)?)\b", "either"),
    (r"\b(\d+\.\d+(?:\.\d+)?) \(Debian\)", "either"),
    (r'"python": ?"(\d[\d.]*)"', "full"),
    (r'python_version="(\d[\d.]*)"', "full"),
    (r"/usr/lib/python(\d+\.\d+)\b", "xy"),
    (r"(?<![/\w])libpython(\d+\.\d+)", "xy"),
    (r"\bpython-(\d+\.\d+)-embed\.pc", "xy"),
]


def test_docs_name_the_embedded_python():
    """Every place the docs name the default build's CPython (Debian's X.Y, the hello
    and metrics examples, its stdlib and libpython) names BUILD/python.json's."""
    facts = python_facts()
    full = facts["version"]
    xy = ".".join(full.split(".")[:2])
    allowed = {"full": {full}, "xy": {xy}, "either": {full, xy}}
    wrong, seen = [], 0
    for rel in DOCS + ["docs/man/codeinterp.1", "docs/man/codeinterpd.8"]:
        text = read(rel)
        for pattern, form in PYTHON_NAMED:
            for m in re.finditer(pattern, text):
                seen += 1
                if m.group(1) not in allowed[form]:
                    line = text.count("\n", 0, m.start()) + 1
                    wrong.append("%s:%d: %r, the build embeds %s" % (rel, line, m.group(0), full))
    assert seen >= 5, "the patterns found nothing: they no longer read the docs"
    assert not wrong, "\n".join(wrong)


def test_docs_name_the_supported_pythons():
    """"CPython ≥ X.Y" is the floor cmake/python.cmake enforces, or the one
    scripts/test-python-versions.sh picks other interpreters from."""
    floor = re.search(r"sys\.version_info < \((\d+), (\d+)\)", read("cmake/python.cmake"))
    others = re.search(r"\$2 >= (\d+)", read("scripts/test-python-versions.sh"))
    assert floor and others
    build_floor, others_floor = "%s.%s" % floor.groups(), "3.%s" % others.group(1)
    wrong = []
    for rel in DOCS:
        text = read(rel)
        for m in re.finditer(r"CPython (?:≥|>=) (\d+\.\d+)(.{0,60})", text, re.S):
            want = build_floor if re.search(r"shared|enable-shared", m.group(2)) else others_floor
            if m.group(1) not in (build_floor, others_floor) or (want == build_floor and m.group(1) != want):
                wrong.append("%s: %r (build floor %s, other CPythons from %s)"
                             % (rel, m.group(0)[:40], build_floor, others_floor))
    assert not wrong, "\n".join(wrong)


# ---- which tests run in which configuration ------------------------------------------

def marked_files(marker):
    """(all, some): the integration test files marked `marker` as a whole, and those with
    only some tests marked."""
    whole, some = set(), set()
    for path in glob.glob(os.path.join(ROOT, "tests", "integration", "test_*.py")):
        with open(path) as f:
            src = f.read()
        module = re.search(r"^pytestmark = .*$", src, re.M)
        if module and "pytest.mark.%s" % marker in module.group(0):
            whole.add(os.path.basename(path))
        elif re.search(r"^\s*@pytest\.mark\.%s\b" % marker, src, re.M):
            some.add(os.path.basename(path))
    return whole, some


@pytest.mark.parametrize("marker", ["rootless", "python"])
def test_testing_md_lists_the_marked_files(marker):
    """docs/testing.md's list of the files make test-rootless and make
    test-python-versions run is what the markers say."""
    text = " ".join(section(read("docs/testing.md"), "## Configurations and markers").split())
    m = re.search(r"marked `%s` are all of (.*?) and some of (.*?) \((\w+) files\)" % marker, text)
    assert m, "docs/testing.md no longer lists the files marked %s" % marker
    whole, some = marked_files(marker)
    assert set(re.findall(r"`(test_\w+\.py)`", m.group(1))) == whole
    assert set(re.findall(r"`(test_\w+\.py)`", m.group(2))) == some
    words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
    assert m.group(3) == words[len(whole | some)]


# A path in the tree as the docs write it: a top-level folder of this repository, then
# a name; build outputs (after "build/" or BUILD) and placeholders (a capital letter
# standing for a value, as in tool-F.json) and patterns are not files of the tree.
TREE_PATH = re.compile(r"(?<![\w./-])((?:supervisor|worker|contract|policy|client|common|tests|scripts|"
                       r"packaging|debian|docs|python|cmake)/[A-Za-z0-9_./-]*[A-Za-z0-9_])(-?[*<])?")


def test_files_the_docs_name_exist():
    docs = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
    named, missing = set(), []
    for rel in docs:
        for path, pattern in TREE_PATH.findall(read(rel)):
            if pattern or re.search(r"(?:^|[-/])[A-Z](?:[-.]|$)", path):
                continue  # a pattern (fuzz_*.c, fuzz_<name>.c) or a placeholder
            named.add(path)
            if not os.path.exists(os.path.join(ROOT, path)):
                missing.append("%s names %s" % (rel, path))
    assert len(named) > 100, len(named)  # the check reads what it thinks it reads
    assert not missing, missing
