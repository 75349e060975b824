"""The adversarial attempts: each a small Python snippet that calls escaped() only when its
attack worked (escaped() prints the run's marker). Snippets run after harness.PRELUDE,
which defines escaped(), CTX (paths and pids of this run: in the sandbox the real ones,
in validation harmless stand-ins), syscall() and reached().

Attempt fields:
  id, category, code
  expect    outcomes allowed in the sandbox (errno mode; kill mode also allows worker_error)
  validate  "host" (root, in a temp dir), "userns" (unshare --user --map-root-user with
            mount/uts/ipc/pid namespaces), or None with why (not validatable)
  vpred     how validation sees success: "marker" (default), ("fd", n, bytes): the snippet
            wrote at least that many bytes to fd n, or "signal": the process died by a signal
  pre       a snippet run in an earlier call (validation: earlier in the same interpreter)
  check     name of a host-side predicate on the result (test_adversarial.CHECKS)
"""
import collections

Attempt = collections.namedtuple("Attempt", "id category code expect validate why vpred pre check")

ANY = ("ok", "python_exception", "worker_error", "resource_limit")
ATTEMPTS = []


def add(id, category, code, expect=ANY, validate="host", why=None, vpred="marker", pre=None, check=None):
    assert not any(a.id == id for a in ATTEMPTS), id
    if why:
        validate = None
    ATTEMPTS.append(Attempt(id, category, code, expect, validate, why, vpred, pre, check))


def reach(id, category, call, validate="host", why=None):
    """An attempt whose success is reaching a denied system call's kernel code."""
    add(id, category, "if reached(%s):\n    escaped(%r)" % (call, id), validate=validate, why=why)


# ---------------------------------------------------------------- filesystem
FS = "filesystem"
# The host's account file: the worker's own names root, sandbox and nobody only, so the
# mark of the host's is an account every Debian has and the worker's has not.
HOST_PASSWD = "'daemon:x:1:' in open(%r).read()"
add("fs.read_etc_passwd", FS, "if %s:\n    escaped()" % (HOST_PASSWD % '/etc/passwd'))
add("fs.read_etc_shadow", FS, "if open('/etc/shadow').read():\n    escaped()")
add("fs.read_host_secret", FS, "if open(CTX['secret_file']).read() == CTX['secret']:\n    escaped()")
add("fs.write_host_file", FS, "open(CTX['target_file'], 'w').write('pwned')\nescaped()")
add("fs.create_host_file", FS, "open(CTX['host_dir'] + '/created', 'w').write('x')\nescaped()")
add("fs.list_host_tmp", FS, """import os
if os.path.basename(CTX['host_dir']) in os.listdir(os.path.dirname(CTX['host_dir'])):
    escaped()""")
add("fs.root_has_host_dirs", FS, """import os
if set(os.listdir('/')) & {'home', 'root', 'proc', 'sys', 'var', 'boot'}:
    escaped()""")
# The worker's /etc holds its own account files and the MIME table, nothing of the host's.
add("fs.etc_has_host_files", FS, """import os
if set(os.listdir('/etc')) - {'passwd', 'group', 'nsswitch.conf', 'mime.types'}:
    escaped()""")
add("fs.passwd_names_host_accounts", FS, """import pwd
if {p.pw_name for p in pwd.getpwall()} - {'root', 'sandbox', 'nobody'}:
    escaped()""")
# Asked, never tried: validation runs as root on the host, where writing would change tzdata.
add("fs.added_binds_writable", FS, """import os
if any(os.access(p, os.W_OK) for p in ('/usr/share/zoneinfo', '/usr/lib/locale/C.utf8', '/etc/mime.types',
                                       '/etc/passwd', '/etc')):
    escaped()""")
# The worker has an /etc/passwd of its own (root, sandbox, nobody): these look for the host's.
add("fs.proc_self_root_listing", FS, "import os\nif 'home' in os.listdir('/proc/self/root'):\n    escaped()")
add("fs.proc_self_root_passwd", FS, "if %s:\n    escaped()" % (HOST_PASSWD % '/proc/self/root/etc/passwd'))
add("fs.dotdot_from_stdlib", FS, "if %s:\n    escaped()" % (HOST_PASSWD % '/usr/lib/python3.11/../../../etc/passwd'))
add("fs.openat_dotdot_chain", FS, """import os
fd = os.open('/usr/lib/python3.11', os.O_RDONLY | os.O_DIRECTORY)
for _ in range(8):
    fd = os.open('..', os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
if set(os.listdir(fd)) & {'proc', 'home', 'root', 'var'}:
    escaped()""")
add("fs.symlink_to_host_secret", FS, """import os
os.symlink(CTX['secret_file'], CTX['tmp'] + '/l')
if open(CTX['tmp'] + '/l').read() == CTX['secret']:
    escaped()""")
add("fs.symlink_dotdot_hostname", FS, """import os
os.symlink('../../../../../../etc/hostname', CTX['tmp'] + '/h')
if open(CTX['tmp'] + '/h').read():
    escaped()""")
add("fs.hardlink_readonly_file", FS, "import os\nos.link(CTX['ro_file'], CTX['tmp'] + '/hl')\nescaped()")
add("fs.open_readonly_file_rdwr", FS, "import os\nos.open(CTX['ro_file'], os.O_RDWR)\nescaped()")
add("fs.chmod_readonly_file", FS, """import os
os.chmod(CTX['ro_file'], os.stat(CTX['ro_file']).st_mode & 0o7777)
escaped()""")
add("fs.utime_readonly_file", FS, """import os
st = os.stat(CTX['ro_file'])
os.utime(CTX['ro_file'], ns=(st.st_atime_ns, st.st_mtime_ns))
escaped()""")
add("fs.mkdir_in_root", FS, """import os
os.mkdir(CTX['root_dir'] + '/adv-dir')
os.rmdir(CTX['root_dir'] + '/adv-dir')
escaped()""")
add("fs.write_in_stdlib", FS, """import os
open(CTX['lib_dir'] + '/adv-x.py', 'w').write('x')
os.unlink(CTX['lib_dir'] + '/adv-x.py')
escaped()""")
add("fs.write_in_inputs", FS, "open(CTX['inputs'] + '/adv-x', 'w').write('x')\nescaped()")
add("fs.write_in_dev", FS, "open(CTX['dev_dir'] + '/adv-x', 'w').write('x')\nescaped()")
add("fs.rename_into_stdlib", FS, """import os
open(CTX['tmp'] + '/m.py', 'w').write('x')
os.rename(CTX['tmp'] + '/m.py', CTX['lib_dir'] + '/adv-m.py')
os.unlink(CTX['lib_dir'] + '/adv-m.py')
escaped()""")
add("fs.replace_lib_symlink", FS, """import os
os.symlink(CTX['tmp'], CTX['root_dir'] + '/adv-lib')
os.unlink(CTX['root_dir'] + '/adv-lib')
escaped()""")
add("fs.mount_tmpfs", FS, """import os
os.mkdir(CTX['tmp'] + '/mnt')
r, e = syscall(165, b'tmpfs', (CTX['tmp'] + '/mnt').encode(), b'tmpfs', 0, 0)
if r == 0:
    escaped()""", validate="userns")
add("fs.mount_proc", FS, """import os
os.mkdir(CTX['tmp'] + '/proc')
r, e = syscall(165, b'proc', (CTX['tmp'] + '/proc').encode(), b'proc', 0, 0)
if r == 0 and os.listdir(CTX['tmp'] + '/proc'):
    escaped()""", validate="userns")
add("fs.bind_mount_root", FS, """import os
os.mkdir(CTX['tmp'] + '/b')
r, e = syscall(165, b'/', (CTX['tmp'] + '/b').encode(), 0, 0x1000 | 0x4000, 0)
if r == 0:
    escaped()""", validate="userns")
add("fs.remount_root_rw", FS, """r, e = syscall(165, 0, b'/', 0, 0x20 | 0x1000, 0)
if r == 0:
    escaped()""", validate="userns")
reach("fs.umount_inputs", FS, "166, CTX['inputs'], 2")
reach("fs.open_tree", FS, "428, -100, b'/', 0")
reach("fs.fsopen_tmpfs", FS, "430, b'tmpfs', 0")
reach("fs.pivot_root_syscall", FS, "155, b'/nonexistent-adv', b'/nonexistent-adv'")
add("fs.chroot", FS, "import os\nos.chroot(CTX['tmp'])\nescaped()")
add("fs.name_to_handle_at", FS, """import ctypes
buf = ctypes.create_string_buffer(8 + 128)
ctypes.c_uint.from_buffer(buf).value = 128
mid = ctypes.c_int()
if reached(303, -100, b'/', buf, ctypes.byref(mid), 0):
    escaped()""")
add("fs.open_by_handle_at", FS, """import ctypes, os
buf = ctypes.create_string_buffer(8 + 8)
ctypes.c_uint.from_buffer(buf).value = 8
fd = os.open(CTX['tmp'], os.O_RDONLY)
if reached(304, fd, buf, 0):
    escaped()""")
add("fs.mknod_char_device", FS, """import os, stat
os.mknod(CTX['tmp'] + '/mem', stat.S_IFCHR | 0o600, os.makedev(1, 3))
escaped()""")
add("fs.mkfifo_in_tmp", FS, "import os\nos.mkfifo(CTX['tmp'] + '/fifo')\nescaped()")
add("fs.write_dev_urandom", FS, "open('/dev/urandom', 'wb').write(b'adv')\nescaped()")
add("fs.write_dev_zero", FS, "import os\nfd = os.open('/dev/zero', os.O_WRONLY)\nos.write(fd, b'x')\nescaped()")
add("fs.sys_class_net", FS, "import os\nif os.listdir('/sys/class/net'):\n    escaped()")
add("fs.proc_mountinfo", FS, "if open('/proc/self/mountinfo').read():\n    escaped()")
add("fs.proc_sys_kernel", FS, "if open('/proc/sys/kernel/osrelease').read():\n    escaped()")
add("fs.proc_self_status", FS, "if 'CapEff' in open('/proc/self/status').read():\n    escaped()")
add("fs.setxattr_in_tmp", FS, """import os
open(CTX['tmp'] + '/x', 'w').close()
os.setxattr(CTX['tmp'] + '/x', 'user.adv', b'1')
escaped()""")
add("fs.mmap_exec_from_tmp", FS, """import mmap, os
open(CTX['tmp'] + '/code', 'wb').write(b'\\xc3' * 4096)
fd = os.open(CTX['tmp'] + '/code', os.O_RDONLY)
mmap.mmap(fd, 4096, prot=mmap.PROT_READ | mmap.PROT_EXEC, flags=mmap.MAP_PRIVATE)
escaped()""")

# ---------------------------------------------------------------- privilege
PR = "privilege"
add("priv.setuid0", PR, "import os\nos.setuid(0)\nif os.geteuid() == 0:\n    escaped()")
add("priv.setresuid0_raw", PR, "r, e = syscall(117, 0, 0, 0)\nif r == 0:\n    escaped()")
add("priv.setgid0", PR, "import os\nos.setgid(0)\nif os.getegid() == 0:\n    escaped()")
add("priv.setgroups0", PR, "import os\nos.setgroups([0])\nescaped()")
CAPS = """import ctypes
hdr = (ctypes.c_uint32 * 2)(0x20080522, 0)
data = (ctypes.c_uint32 * 6)()
"""
add("priv.has_capabilities", PR, CAPS + """syscall(125, hdr, data)
if any(data):
    escaped(list(data))""")
add("priv.capset_raise_all", PR, CAPS + """full = (ctypes.c_uint32 * 6)(*([0xffffffff] * 6))
syscall(126, hdr, full)
syscall(125, hdr, data)
if data[0]:
    escaped()""")
add("priv.ambient_raise_sys_admin", PR, CAPS + """syscall(125, hdr, data)
data[2] |= 1 << 21
syscall(126, hdr, data)
r, e = syscall(157, 47, 2, 21, 0, 0)
if r == 0:
    escaped()""")
add("priv.securebits_clear", PR, "r, e = syscall(157, 28, 0, 0, 0, 0)\nif r == 0:\n    escaped()")
add("priv.bounding_set_has_sys_admin", PR, """import ctypes
libc = ctypes.CDLL(None)
if libc.prctl(23, 21, 0, 0, 0) == 1:
    escaped()""")
add("priv.no_new_privs_off", PR, "import ctypes\nif ctypes.CDLL(None).prctl(39, 0, 0, 0, 0) == 0:\n    escaped()")
add("priv.seccomp_off", PR, "import ctypes\nif ctypes.CDLL(None).prctl(21, 0, 0, 0, 0) == 0:\n    escaped()")
add("priv.setuid_binary_usable", PR, """import os, stat
for d in ('/usr/bin', '/bin', '/usr/sbin', '/usr/lib/dbus-1.0', '/usr/lib/openssh', '/usr/lib/x86_64-linux-gnu'):
    try:
        names = os.listdir(d)
    except OSError:
        continue
    for n in names:
        p = os.path.join(d, n)
        try:
            st = os.stat(p)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_mode & stat.S_ISUID and st.st_uid == 0 \\
                and not os.statvfs(p).f_flag & os.ST_NOSUID:
            escaped(p)
            raise SystemExit""")
add("priv.unshare_user", PR, "r, e = syscall(272, 0x10000000)\nif r == 0:\n    escaped()")
add("priv.unshare_all", PR, "r, e = syscall(272, 0x10000000 | 0x20000 | 0x40000000 | 0x8000000 | 0x4000000)\nif r == 0:\n    escaped()")
add("priv.clone_newuser", PR, """import os
r, e = syscall(56, 0x10000000 | 17, 0, 0, 0, 0)
if r == 0:
    os._exit(0)
if r > 0:
    os.waitpid(r, 0)
    escaped()""")
reach("priv.setns", PR, "308, 0, 0")
add("priv.keyctl_thread_keyring", PR, "r, e = syscall(250, 0, -1, 1)\nif r > 0:\n    escaped()")
add("priv.add_key", PR, "r, e = syscall(248, b'user', b'adv', b'x', 1, -1)\nif r > 0:\n    escaped()")
reach("priv.request_key", PR, "249, b'user', b'adv-none', 0, -1")
add("priv.bpf_map_create", PR, """import ctypes
attr = (ctypes.c_uint32 * 30)(2, 4, 4, 1)
r, e = syscall(321, 0, attr, 120)
if r >= 0:
    escaped()""")
add("priv.bpf_prog_load", PR, """import ctypes
insns = (ctypes.c_uint64 * 2)(0xb7, 0x95)  # r0 = 0; exit
lic = ctypes.create_string_buffer(b'GPL')
attr = (ctypes.c_uint64 * 16)()
ctypes.memmove(attr, (ctypes.c_uint32 * 2)(1, 2), 8)
attr[1] = ctypes.addressof(insns)
attr[2] = ctypes.addressof(lic)
r, e = syscall(321, 5, attr, 128)
if r >= 0:
    escaped()""")
add("priv.perf_event_open", PR, """import ctypes
attr = (ctypes.c_uint32 * 32)()
attr[0] = 1      # PERF_TYPE_SOFTWARE
attr[1] = 128    # size
r, e = syscall(298, attr, 0, -1, -1, 0)
if r >= 0:
    escaped()""")
add("priv.userfaultfd", PR, "r, e = syscall(323, 0o2000000)\nif r >= 0:\n    escaped()")
add("priv.io_uring_setup", PR, """import ctypes
params = (ctypes.c_uint8 * 120)()
r, e = syscall(425, 2, params)
if r >= 0:
    escaped()""")
reach("priv.init_module_invalid_image", PR, "175, b'\\0' * 64, 64, b''",
      why="the kernel is built without module support (no /proc/modules): init_module is ENOSYS on the host too")
reach("priv.finit_module_dev_null", PR, "313, 0, b'', 0",
      why="the kernel is built without module support: finit_module is ENOSYS on the host too")
reach("priv.delete_module", PR, "176, b'adv_none', 0o4000",
      why="the kernel is built without module support: delete_module is ENOSYS on the host too")
reach("priv.kexec_load_bad_flags", PR, "246, 0, 0, 0, 0xdead0000",
      why="the kernel is built without kexec: ENOSYS on the host too")
reach("priv.kexec_file_load_bad_flags", PR, "320, -1, -1, 0, 0, 0xffff",
      why="the kernel is built without kexec_file_load: ENOSYS on the host too")
reach("priv.reboot_bad_magic", PR, "169, 0, 0, 0, 0")
reach("priv.swapon_missing", PR, "167, b'/nonexistent-adv', 0")
reach("priv.acct_missing", PR, "163, b'/nonexistent-adv'")
reach("priv.iopl0", PR, "172, 0", why="the kernel is built without I/O port access (iopl is ENOSYS on the host too)")
reach("priv.ioperm_off", PR, "173, 0x80, 1, 0", why="the kernel is built without I/O port access (ioperm is ENOSYS on the host too)")
add("priv.modify_ldt_read", PR, """import ctypes
buf = ctypes.create_string_buffer(16)
if reached(154, 0, buf, 16):
    escaped()""")
reach("priv.quotactl_bad_cmd", PR, "179, 0, 0, 0, 0")
reach("priv.clock_settime_bad_clock", PR, "227, 0x7fff, 0")
add("priv.adjtimex_read", PR, """import ctypes
tx = (ctypes.c_uint8 * 208)()
r, e = syscall(159, tx)
if r >= 0:
    escaped()""")
reach("priv.settimeofday_null", PR, "164, 0, 0")
add("priv.sethostname", PR, "import socket\nsocket.sethostname('adv')\nescaped()", validate="userns")
reach("priv.setdomainname", PR, "171, b'adv', 3", validate="userns")
add("priv.ptrace_traceme", PR, "r, e = syscall(101, 0, 0, 0, 0)\nif r == 0:\n    escaped()")
add("priv.ptrace_seize_victim", PR, "r, e = syscall(101, 0x4206, CTX['victim_pid'], 0, 0)\nif r == 0:\n    escaped()")
add("priv.process_vm_readv_victim", PR, """import ctypes
buf = ctypes.create_string_buffer(8)
local = (ctypes.c_uint64 * 2)(ctypes.addressof(buf), 8)
remote = (ctypes.c_uint64 * 2)(0x400000, 8)
if reached(310, CTX['victim_pid'], local, 1, remote, 1, 0):
    escaped()""")
add("priv.pidfd_open_victim", PR, "r, e = syscall(434, CTX['victim_pid'], 0)\nif r >= 0:\n    escaped()")
reach("priv.pidfd_getfd", PR, "438, 0, 0, 0")
add("priv.kcmp_self", PR, "import os\nr, e = syscall(312, os.getpid(), os.getpid(), 0, 0, 0)\nif r >= 0:\n    escaped()")
add("priv.memfd_create", PR, "r, e = syscall(319, b'adv', 0)\nif r >= 0:\n    escaped()")
add("priv.seccomp_get_action_avail", PR, """import ctypes
a = ctypes.c_uint32(0x7fff0000)
if reached(317, 2, 0, ctypes.byref(a)):
    escaped()""")
add("priv.landlock_abi", PR, "r, e = syscall(444, 0, 0, 1)\nif r >= 0:\n    escaped()")
add("priv.fanotify_init", PR, "r, e = syscall(300, 0, 0)\nif r >= 0:\n    escaped()")
add("priv.personality_no_aslr", PR, "r, e = syscall(135, 0x0040000)\nif r >= 0:\n    escaped()")
add("priv.setrlimit_nofile", PR, """import resource
resource.setrlimit(resource.RLIMIT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE))
escaped()""")
add("priv.prlimit_set_cpu", PR, """import ctypes
old = (ctypes.c_uint64 * 2)()
syscall(302, 0, 0, 0, old)
r, e = syscall(302, 0, 0, old, 0)
if r == 0:
    escaped()""")
add("priv.nice_negative", PR, "import os\nos.setpriority(os.PRIO_PROCESS, 0, -5)\nescaped()")
add("priv.sched_fifo", PR, """import os
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
escaped()""")
add("priv.sched_setaffinity", PR, "import os\nos.sched_setaffinity(0, os.sched_getaffinity(0))\nescaped()")
add("priv.mlock", PR, """import ctypes
buf = ctypes.create_string_buffer(4096)
if ctypes.CDLL(None).mlock(buf, 4096) == 0:
    escaped()""")
reach("priv.mbind", PR, "237, 0, 0, 0, 0, 0, 0")
reach("priv.vhangup", PR, "153")

# ---------------------------------------------------------------- host information
HI = "host information"
add("host.env_canary", HI, """import os
if os.environ.get(CTX['env_name']) == CTX['env_value'] or any(CTX['env_value'] in v for v in os.environ.values()):
    escaped()""")
add("host.proc_environ", HI, """import os
for p in ('self', str(os.getppid()), '1'):
    try:
        if CTX['env_value'].encode() in open('/proc/%s/environ' % p, 'rb').read():
            escaped(p)
    except OSError:
        pass""")
add("host.hostname", HI, "import socket\nif socket.gethostname() == CTX['host_hostname']:\n    escaped()")
add("host.uname_nodename", HI, "import os\nif os.uname().nodename == CTX['host_hostname']:\n    escaped()")
# What the zygote's preload memoised in the host's namespaces (platform.uname(), which
# pandas asks for at import) must not reach a worker.
add("host.platform_node", HI, """import platform
if CTX['host_hostname'] in (platform.node(), platform.uname().node, platform.uname()[1]):
    escaped()""")
add("host.machine_id", HI, "if open('/etc/machine-id').read().strip():\n    escaped()")
add("host.dbus_machine_id", HI, "if open('/var/lib/dbus/machine-id').read().strip():\n    escaped()")
add("host.proc_other_pids", HI, """import os
if [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()]:
    escaped()""")
add("host.getppid", HI, "import os\nif os.getppid() > 1:\n    escaped()")
add("host.own_host_pid", HI, "import os\nif os.getpid() != 1:\n    escaped()")
add("host.supervisor_pid_exists", HI, "import os\nos.kill(CTX['supervisor_pid'], 0)\nescaped()")
add("host.victim_pid_exists", HI, "import os\nos.kill(CTX['victim_pid'], 0)\nescaped()")
add("host.proc_self_cgroup", HI, "if open('/proc/self/cgroup').read():\n    escaped()")
add("host.sys_fs_cgroup", HI, "import os\nif os.listdir('/sys/fs/cgroup'):\n    escaped()")
add("host.dev_kmsg", HI, "import os\nfd = os.open('/dev/kmsg', os.O_RDONLY | os.O_NONBLOCK)\nif os.read(fd, 8192):\n    escaped()")
add("host.syslog_size", HI, "r, e = syscall(103, 10, 0, 0)\nif r >= 0:\n    escaped()")
add("host.proc_cmdline", HI, "if open('/proc/cmdline').read():\n    escaped()")
add("host.proc_kallsyms", HI, "if open('/proc/kallsyms').read(100):\n    escaped()")
add("host.sysinfo_process_count", HI, """import ctypes, threading
buf = (ctypes.c_uint8 * 128)()
r, e = syscall(99, buf)
procs = ctypes.c_ushort.from_buffer(buf, 80).value
if r == 0 and procs > threading.active_count() + 4:
    escaped(procs)""")
add("host.supervisor_socket_path", HI, "import os\nif os.path.exists(CTX['socket_path']):\n    escaped()")
add("host.sysv_shm", HI, """r, e = syscall(29, 0, 4096, 0o1600)
if r >= 0:
    syscall(31, r, 0, 0)
    escaped()""")
add("host.sysv_msgq", HI, """r, e = syscall(68, 0, 0o1600)
if r >= 0:
    syscall(71, r, 0, 0)
    escaped()""")
add("host.net_interfaces", HI, """import socket
if [n for i, n in socket.if_nameindex() if n != 'lo']:
    escaped()""")
add("host.root_home", HI, "import os\nos.listdir('/root')\nescaped()")

# ---------------------------------------------------------------- process
PC = "process"
add("proc.fork", PC, "import os\npid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)\nescaped()")
add("proc.raw_clone_fork", PC, """import os
r, e = syscall(56, 17, 0, 0, 0, 0)
if r == 0:
    os._exit(0)
if r > 0:
    os.waitpid(r, 0)
    escaped()""")
add("proc.ctypes_fork", PC, """import ctypes, os
pid = ctypes.CDLL(None).fork()
if pid == 0:
    os._exit(0)
if pid > 0:
    os.waitpid(pid, 0)
    escaped()""")
LDSO = """import glob, os
ld = sorted(glob.glob('/usr/lib/x86_64-linux-gnu/ld-linux-*.so*') + glob.glob('/lib64/ld-linux-*.so*'))[0]
mark = '/ESCAPED-' + _T
"""
add("proc.execv_ldso", PC, LDSO + "os.execv(ld, [ld, mark])")
add("proc.ctypes_execv", PC, LDSO + """import ctypes
argv = (ctypes.c_char_p * 3)(ld.encode(), mark.encode(), None)
ctypes.CDLL(None).execv(ld.encode(), argv)""")
add("proc.execveat_raw", PC, LDSO + """import ctypes
argv = (ctypes.c_char_p * 3)(ld.encode(), mark.encode(), None)
envp = (ctypes.c_char_p * 1)(None)
syscall(322, -100, ld.encode(), argv, envp, 0)""")
add("proc.posix_spawn", PC, LDSO + "pid = os.posix_spawn(ld, [ld, mark], {})\nos.waitpid(pid, 0)")
add("proc.subprocess", PC, LDSO + "import subprocess\nsubprocess.run([ld, mark])")
add("proc.os_system", PC, "import os\nos.system('echo ESCAPED-' + _T)")
# The runner's guards (docs/security.md, "What the code is told") answer os.fork, os.system,
# posix_spawn, subprocess and socket.socket before the kernel does: these go around them,
# to the C library, so that the filter is still what is tested.
add("proc.ctypes_system", PC, """import ctypes
ctypes.CDLL(None).system(('echo ESCAPED-' + _T).encode())""")
add("proc.ctypes_posix_spawn", PC, LDSO + """import ctypes
pid = ctypes.c_int()
argv = (ctypes.c_char_p * 3)(ld.encode(), mark.encode(), None)
envp = (ctypes.c_char_p * 1)(None)
if ctypes.CDLL(None).posix_spawn(ctypes.byref(pid), ld.encode(), None, None, argv, envp) == 0:
    os.waitpid(pid.value, 0)""")
add("proc.multiprocessing", PC, """import multiprocessing
p = multiprocessing.get_context('fork').Process(target=lambda: None)
p.start()
p.join()
escaped()""")
add("proc.fork_and_linger", PC, """import os, time
pid = os.fork()
if pid == 0:
    os.setsid()
    time.sleep(2)
    os._exit(0)
escaped()""")
add("proc.kill_victim", PC, "import os, signal\nos.kill(CTX['victim_pid'], signal.SIGKILL)\nescaped()")
add("proc.signal_supervisor", PC, "import os, signal\nos.kill(CTX['supervisor_pid'], signal.SIGCONT)\nescaped()")
add("proc.kill_minus_one_probe", PC, "import os\nos.kill(-1, 0)\nescaped()")
add("proc.tgkill_supervisor", PC, "r, e = syscall(234, CTX['supervisor_pid'], CTX['supervisor_pid'], 0)\nif r == 0:\n    escaped()")
add("proc.signal_parent", PC, "import os, signal\nif os.getppid() > 1:\n    os.kill(os.getppid(), signal.SIGCONT)\n    escaped()")
add("proc.setsid", PC, "import os\nos.setsid()\nescaped()")
add("proc.setpgid", PC, "import os\nos.setpgid(0, 0)\nescaped()")
add("proc.clear_pdeathsig", PC, "r, e = syscall(157, 1, 0, 0, 0, 0)\nif r == 0:\n    escaped()")
add("proc.child_subreaper", PC, "r, e = syscall(157, 36, 1, 0, 0, 0)\nif r == 0:\n    escaped()")
add("proc.set_dumpable", PC, "r, e = syscall(157, 4, 1, 0, 0, 0)\nif r == 0:\n    escaped()")
reach("proc.prctl_set_mm", PC, "157, 35, 0xff, 0, 0, 0",
      why="PR_SET_MM needs CAP_SYS_RESOURCE in the initial namespace, which this host's root lacks (bounding set)")
reach("proc.prctl_set_ptracer_any", PC, "157, 0x59616d61, -1, 0, 0, 0")
add("proc.tiocsti", PC, """import fcntl, os, termios
m, s = os.openpty()
fcntl.ioctl(s, termios.TIOCSTI, b'x')
escaped()""")

# ---------------------------------------------------------------- network
NET = "network"
FAMILIES = [
    ("inet_tcp", 2, 1, 0), ("inet_udp", 2, 2, 0), ("inet_raw_icmp", 2, 3, 1), ("inet_icmp_dgram", 2, 2, 1),
    ("inet6_tcp", 10, 1, 0), ("inet6_udp", 10, 2, 0), ("unix_stream", 1, 1, 0), ("unix_dgram", 1, 2, 0),
    ("unix_seqpacket", 1, 5, 0), ("netlink_route", 16, 3, 0), ("netlink_audit", 16, 3, 9),
    ("netlink_uevent", 16, 3, 15), ("packet_raw", 17, 3, 0), ("vsock_stream", 40, 1, 0),
    ("alg_hash", 38, 5, 0), ("xdp", 44, 3, 0), ("can_raw", 29, 3, 1), ("tipc_rdm", 30, 4, 0),
    ("bluetooth_hci", 31, 3, 1), ("pfkey", 15, 3, 2), ("llc", 26, 2, 0), ("rds", 21, 5, 0),
    ("qipcrtr", 42, 2, 0), ("smc", 43, 1, 0), ("mctp", 45, 2, 0), ("appletalk", 5, 2, 0),
    ("ax25", 3, 5, 0), ("x25", 9, 5, 0), ("sctp", 2, 1, 132), ("kcm", 41, 2, 0),
]
# Families this host's kernel does not have (EAFNOSUPPORT/EPROTONOSUPPORT as root on the host
# too): the sandbox attempt still runs, it cannot be validated here.
NOT_BUILT = {"alg_hash", "can_raw", "tipc_rdm", "bluetooth_hci", "pfkey", "llc", "rds", "qipcrtr", "smc", "mctp",
             "appletalk", "ax25", "x25", "sctp", "kcm"}
for name, fam, typ, proto in FAMILIES:
    why = None
    if name in NOT_BUILT:
        why = "address family or protocol not built into this kernel (refused as root on the host too)"
    elif name == "inet_icmp_dgram":
        why = "net.ipv4.ping_group_range is '1 0' on this host: EACCES as root on the host too"
    add("net.socket_" + name, NET, "import socket\nsocket.socket(%d, %d, %d)\nescaped()" % (fam, typ, proto), why=why)
add("net.raw_syscall_socket", NET, "r, e = syscall(41, 2, 1, 0)\nif r >= 0:\n    escaped()")
add("net.ctypes_socket", NET, "import ctypes\nif ctypes.CDLL(None).socket(2, 1, 0) >= 0:\n    escaped()")
# The C socket type under the runner's guarded _socket.socket (on the host: _socket.socket).
add("net.unguarded_socket_type_loopback_tcp", NET, """import _socket
real = _socket.socket
while real.__base__ is not object:
    real = real.__base__
s = real(2, 1, 0)
s.settimeout(2)
s.connect(('127.0.0.1', CTX['tcp_port']))
escaped()""")
# A connected AF_UNIX pair is allowed (asyncio's self-pipe); any other family is not,
# nor passing descriptors or addresses over the pair, nor a socket of its own.
add("net.socketpair_inet", NET, "import socket\nsocket.socketpair(socket.AF_INET)\nescaped()",
    validate=None, why="AF_INET socketpair is EOPNOTSUPP on any host; the filter must refuse it first")
add("net.socketpair_pass_fd", NET, """import socket, array, os
a, b = socket.socketpair()
fd = os.open('/', os.O_RDONLY)
a.sendmsg([b'x'], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [fd]))])
escaped()""")
add("net.socketpair_sendto_supervisor", NET, """import socket
a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
a.sendto(b'x', CTX['socket_path'])
escaped()""", validate=None, why="on the host an unbound datagram socket may send to a path: the filter must refuse it")
add("net.raw_syscall_socket_unix", NET, "r, e = syscall(41, 1, 1, 0)\nif r >= 0:\n    escaped()")
add("net.connect_host_loopback_tcp", NET, """import socket
s = socket.create_connection(('127.0.0.1', CTX['tcp_port']), timeout=2)
escaped()""")
add("net.connect_host_abstract", NET, """import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect('\\0' + CTX['abstract'])
escaped()""")
add("net.connect_supervisor_socket", NET, """import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(CTX['socket_path'])
escaped()""")
add("net.sendto_on_stdout", NET, """r, e = syscall(44, 1, b'x', 1, 0, 0, 0)
if r == 1:
    escaped()""", why="sendto on a pipe is ENOTSOCK on the host too: this attempt only shows the call is refused before the kernel looks at the descriptor")

# ---------------------------------------------------------------- output and result forgery
OUT = "output forgery"
N = 8 * 1024 * 1024
add("out.stdout_flood", OUT, "import os\nfor _ in range(%d):\n    os.write(1, b'A' * 65536)" % (N // 65536),
    vpred=("fd", 1, N), check="stdout_fitted_8m")
add("out.stderr_flood", OUT, "import os\nfor _ in range(%d):\n    os.write(2, b'B' * 65536)" % (N // 65536),
    vpred=("fd", 2, N), check="stderr_fitted_8m")
add("out.invalid_utf8_flood", OUT, "import os\nfor _ in range(64):\n    os.write(1, b'\\xff\\xfe' * 16384)",
    vpred=("fd", 1, 64 * 32768), check="stdout_bounded")
add("out.many_tiny_writes", OUT, "import os\nfor _ in range(100000):\n    os.write(1, b'c')",
    vpred=("fd", 1, 100000), check="stdout_bounded")
add("out.result_pipe_flood", OUT, "import os\nfor _ in range(64):\n    os.write(4, b'R' * 65536)",
    vpred=("fd", 4, 64 * 65536), check="result_bounded")
add("out.stdout_onto_result_pipe", OUT, "import os\nos.dup2(4, 1)\nfor _ in range(64):\n    os.write(1, b'D' * 65536)",
    vpred=("fd", 4, 64 * 65536), check="result_bounded")
add("out.report_pipe_flood", OUT, "import os\nfor _ in range(40):\n    os.write(3, b'\\x00' * 65536)",
    vpred=("fd", 3, 40 * 65536), check="worker_error")
add("out.report_garbage", OUT, "import os\nos.write(3, b'\\x00\\x00\\x00\\x05hello')",
    vpred=("fd", 3, 9), check="worker_error")
add("out.report_huge_length_prefix", OUT, "import os\nos.write(3, b'\\xff\\xff\\xff\\xff' + b'\\x81' * 64)",
    vpred=("fd", 3, 68), check="worker_error")
FORGED = r"""import os, struct
def mp_str(s):
    b = s.encode()
    return bytes([0xa0 | len(b)]) + b
def frame(pairs):
    body = bytes([0x80 | len(pairs)]) + b''.join(mp_str(k) + v for k, v in pairs)
    os.write(3, struct.pack('>I', len(body)) + body)
"""
add("out.forged_outcome_and_evidence", OUT, FORGED + """frame([('t', mp_str('done')), ('hasResult', b'\\xc2'), ('limit', b'\\xc0'),
       ('exception', b'\\xc0'), ('outcome', mp_str('timeout')),
       ('exitStatus', b'\\x81' + mp_str('pid') + b'\\xcd\\x10\\x92')])
os._exit(0)""", vpred=("fd", 3, 40), check="not_forged")
add("out.forged_done_then_raise", OUT, FORGED + """frame([('t', mp_str('done')), ('hasResult', b'\\xc2'), ('limit', b'\\xc0'), ('exception', b'\\xc0')])
raise ValueError('after a forged report')""", vpred=("fd", 3, 20), check="worker_error")
add("out.forged_done_then_sleep_past_deadline", OUT, FORGED + """import time
frame([('t', mp_str('done')), ('hasResult', b'\\xc2'), ('limit', b'\\xc0'), ('exception', b'\\xc0')])
time.sleep(CTX['timeout_s'] + 2)""", expect=("timeout",), vpred=("fd", 3, 20), check="timeout")
add("out.close_report_pipe", OUT, "import os\nos.close(3)\nos.write(1, b'closed')\nos._exit(0)",
    vpred=("fd", 1, 6), check="worker_error")
add("out.report_pipe_onto_stdout", OUT, "import os\nos.dup2(1, 3)\nos.write(1, b'x')",
    vpred=("fd", 1, 1), check="worker_error")
add("out.fake_protocol_frame_on_stdout", OUT, r"""import os, struct
body = b'\x84\xa2id\x01\xa4type\xa6result\xa7outcome\xaequota_exhausted\xa6callId\x01'
os.write(1, struct.pack('>I', len(body)) + body)""", vpred=("fd", 1, 40), check="ok_no_forgery")
add("out.segfault_after_output", OUT, "import ctypes, os\nos.write(1, b'before')\nctypes.string_at(0)",
    vpred="signal", check="worker_error")

# ---------------------------------------------------------------- Python tricks
PY = "python tricks"
SHELL = """import ctypes, mmap
def run(code):
    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(code)
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    return ctypes.CFUNCTYPE(ctypes.c_long)(addr)()
"""
# mov eax,41; mov edi,2; mov esi,1; xor edx,edx; syscall; ret
add("py.shellcode_syscall_socket", PY, SHELL + """r = run(b'\\xb8\\x29\\x00\\x00\\x00\\xbf\\x02\\x00\\x00\\x00\\xbe\\x01\\x00\\x00\\x00\\x31\\xd2\\x0f\\x05\\xc3')
if r >= 0:
    escaped(r)""")
# mov eax,57; syscall; test eax,eax; jnz +7 (to ret); mov eax,60; xor edi,edi; syscall; ret
add("py.shellcode_syscall_fork", PY, SHELL + """r = run(b'\\xb8\\x39\\x00\\x00\\x00\\x0f\\x05\\x85\\xc0\\x75\\x09\\xb8\\x3c\\x00\\x00\\x00\\x31\\xff\\x0f\\x05\\xc3')
if r > 0:
    escaped(r)""")
# mov eax,20 (i386 getpid); int 0x80; ret
add("py.shellcode_int80_i386", PY, SHELL + """r = run(b'\\xb8\\x14\\x00\\x00\\x00\\xcd\\x80\\xc3')
if r > 0:
    escaped(r)""", expect=("worker_error",))
# mov eax,0x40000027 (x32 getpid); syscall; ret
add("py.shellcode_x32_getpid", PY, SHELL + """r = run(b'\\xb8\\x27\\x00\\x00\\x40\\x0f\\x05\\xc3')
if r > 0:
    escaped(r)""", expect=("worker_error",), why="the host kernel has no x32 ABI (ENOSYS on the host too)")
add("py.import_pip_from_dist_packages", PY, """import sys
sys.path.append('/usr/lib/python3/dist-packages')
import pip
escaped()""")
add("py.import_pip_meta_path_cleared", PY, """import sys, importlib.machinery
keep = (importlib.machinery.BuiltinImporter, importlib.machinery.FrozenImporter, importlib.machinery.PathFinder)
sys.meta_path[:] = [m for m in sys.meta_path if m in keep]
sys.path.append('/usr/lib/python3/dist-packages')
import pip
escaped()""")
add("py.posixsubprocess_fork_exec", PY, LDSO + """import _posixsubprocess
er, ew = os.pipe()
pid = _posixsubprocess.fork_exec([ld.encode(), mark.encode()], [ld.encode()], True, (ew,), None, None,
    -1, -1, -1, -1, -1, -1, er, ew, False, False, -1, None, None, None, -1, None, False)
os.waitpid(pid, 0)""")
LEAK = "'LEAK-' + _T[:4]"
add("py.gc_finds_previous_call_object", PY, """import gc
for o in gc.get_objects():
    if isinstance(o, list) and len(o) == 1 and o[0] == %s:
        escaped()
        break""" % LEAK, pre="import sys\nsys.adv_leak = [%s]" % LEAK)
add("py.builtins_from_previous_call", PY, "import builtins\nif getattr(builtins, 'adv_leak', None):\n    escaped()",
    pre="import builtins\nbuiltins.adv_leak = 1")
add("py.module_patch_from_previous_call", PY, "import json\nif json.dumps(1) == 'LEAK':\n    escaped()",
    pre="import json\njson.dumps = lambda *a, **k: 'LEAK'")
add("py.sys_modules_from_previous_call", PY, "import sys\nif 'adv_planted' in sys.modules:\n    escaped()",
    pre="import sys, types\nsys.modules['adv_planted'] = types.ModuleType('adv_planted')")
add("py.tmp_file_from_previous_call", PY, "import os\nif os.path.exists(CTX['tmp'] + '/adv-leak'):\n    escaped()",
    pre="open(CTX['tmp'] + '/adv-leak', 'w').write('x')")
add("py.environ_from_previous_call", PY, "import os\nif os.environ.get('ADV_LEAK'):\n    escaped()",
    pre="import os\nos.environ['ADV_LEAK'] = '1'")
add("py.linecache_from_previous_call", PY, "import linecache\nif '<adv-leak>' in linecache.cache:\n    escaped()",
    pre="import linecache\nlinecache.cache['<adv-leak>'] = (4, None, ['LEAK'], '<adv-leak>')")
add("py.thread_from_previous_call", PY, """import threading
if any(t.name == 'adv-leak' for t in threading.enumerate()):
    escaped()""", pre="import threading, time\nthreading.Thread(target=time.sleep, args=(30,), name='adv-leak', daemon=True).start()")
add("py.frame_locals_from_previous_call", PY, """import gc, types
for o in gc.get_objects():
    if isinstance(o, types.GeneratorType) and o.gi_frame is not None and o.gi_frame.f_locals.get('leak') == %s:
        escaped()
        break""" % LEAK, pre="""import json
def _held():
    leak = %s
    yield leak
json._adv_held = _held()
next(json._adv_held)""" % LEAK)
add("py.atexit_after_the_report", PY, "pass",
    pre="import atexit\natexit.register(lambda: escaped('atexit'))")
add("py.profile_hook_from_previous_call", PY, "def adv_probe():\n    pass\nadv_probe()",
    pre="import sys\nsys.setprofile(lambda f, e, a: e == 'call' and f.f_code.co_name == 'adv_probe' and escaped('profile'))")
add("py.random_seed_from_previous_call", PY, """import random
r = random.random()
random.seed(4242)
if r == random.random():
    escaped()""", pre="import random\nrandom.seed(4242)")
add("py.ctypes_raw_socket_after_deleting_builtins", PY, """import builtins
del builtins.open
r, e = syscall(41, 1, 1, 0)
if r >= 0:
    escaped()""")

# ---------------------------------------------------------------- CPU and memory
RES = "cpu and memory"
add("res.cpu_busy_loop", RES, """import time
while time.process_time() < CTX['cpu_s'] + 1:
    pass
escaped()""", expect=("resource_limit", "timeout"))
add("res.cpu_ignore_sigxcpu", RES, """import signal, time
signal.signal(signal.SIGXCPU, signal.SIG_IGN)
while time.process_time() < CTX['cpu_s'] + 1:
    pass
escaped()""", expect=("resource_limit", "timeout"))
add("res.sleep_past_deadline", RES, "import time\ntime.sleep(CTX['timeout_s'] + 1)\nescaped()", expect=("timeout",))
add("res.block_signals_and_sleep", RES, """import signal, time
signal.pthread_sigmask(signal.SIG_BLOCK, range(1, signal.NSIG))
time.sleep(CTX['timeout_s'] + 1)
escaped()""", expect=("timeout",))
add("res.alloc_over_memory_limit", RES, "b = bytearray(CTX['mem'] + (64 << 20))\nescaped()")
add("res.mmap_over_memory_limit", RES, "import mmap\nm = mmap.mmap(-1, CTX['mem'] * 2)\nescaped()")
add("res.touch_memory_over_limit", RES, """chunks = []
while sum(map(len, chunks)) < CTX['mem'] + (32 << 20):
    chunks.append(b'x' * (16 << 20))
escaped()""")
add("res.threads_over_process_limit", RES, """import threading, time
ev = threading.Event()
ts = []
for _ in range(CTX['nproc'] * 4):
    t = threading.Thread(target=ev.wait, args=(5,))
    t.start()
    ts.append(t)
ev.set()
escaped()""")
add("res.fds_over_limit", RES, """import os
fds = [os.open('/dev/null', os.O_RDONLY) for _ in range(CTX['nofile'] * 3)]
escaped()""")
add("res.tmp_over_size", RES, """import os
chunk = b'x' * (1 << 20)
for i in range(CTX['tmp_bytes'] // (1 << 20) + 2):
    with open(CTX['tmp'] + '/fill%d' % i, 'wb') as f:
        f.write(chunk)
escaped()""")
add("res.tmp_inodes", RES, """import os
os.mkdir(CTX['tmp'] + '/many')
for i in range(5000):
    open(CTX['tmp'] + '/many/%d' % i, 'w').close()
escaped()""")
add("res.file_over_fsize", RES, """with open(CTX['tmp'] + '/big', 'wb') as f:
    f.write(b'x' * (CTX['file_bytes'] + 4096))
escaped()""")
add("res.sparse_1tib_file", RES, """import os
open(CTX['tmp'] + '/sparse', 'w').close()
os.truncate(CTX['tmp'] + '/sparse', 1 << 40)
if os.stat(CTX['tmp'] + '/sparse').st_size == 1 << 40:
    escaped()""")
add("res.fallocate_over_tmp", RES, """import os
fd = os.open(CTX['tmp'] + '/alloc', os.O_CREAT | os.O_WRONLY)
os.posix_fallocate(fd, 0, CTX['tmp_bytes'] + (1 << 20))
escaped()""")
add("res.recursion_crash", RES, """import sys
sys.setrecursionlimit(10 ** 8)
def f(n):
    return f(n + 1) + 1
f(0)""", vpred="signal", check="supervisor_alive")
add("res.pipe_buffers", RES, """import fcntl, os
n = 0
for _ in range(CTX['nofile']):
    r, w = os.pipe()
    fcntl.fcntl(w, 1031, 1 << 20)
    n += 1
if n * 2 > CTX['nofile']:
    escaped(n)""")
