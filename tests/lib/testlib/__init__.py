"""The tests' one helper module (docs/testing.md, "The helpers"): import what a test
needs from here. Submodules: env (the build and the configuration), supervisor
(Supervisor, Conn, status), proc (/proc), cgroups, confinement (the shipped capabilities),
frames, waits, trace (ptrace), plugin (fixtures and the configuration's test selection,
loaded by tests/conftest.py)."""
from . import cgroups, confinement, env, frames, proc, trace, waits
from .env import (ALL_TESTS, ASAN, BUILD, CLIENT, DAEMON, MUST_SANDBOX, PYTHON, ROOTLESS, ROOTLESS_USER,
                  SOURCE_ROOT, WAIT_LIMIT, WORKER_START, runtime_ancestors)
from .frames import (collect_outcomes, count, describe, drain, execute_frame, frame, of, one_result, pump, raw_frame,
                     recv_result_frame)
from .supervisor import (CORE_OUTCOMES, NORTHSTAR, Conn, Supervisor, UsernsSupervisor, ask, calls, check_northstar,
                         execute_once, ok, raised, require_sandbox, running_supervisor, sandbox_available, sha,
                         status, stops_cleanly, terminate, unavailable, value, worker_pids, worker_pids_of)
from .waits import HeldCall, held, start_held, wait_call, wait_for, wait_idle, wait_running, wait_states

__all__ = [
    "cgroups", "confinement", "env", "frames", "proc", "trace", "waits",
    "ALL_TESTS", "ASAN", "BUILD", "CLIENT", "DAEMON", "MUST_SANDBOX", "PYTHON", "ROOTLESS", "ROOTLESS_USER",
    "SOURCE_ROOT", "WAIT_LIMIT", "WORKER_START", "runtime_ancestors",
    "collect_outcomes", "count", "describe", "drain", "execute_frame", "frame", "of", "one_result", "pump",
    "raw_frame", "recv_result_frame",
    "CORE_OUTCOMES", "NORTHSTAR", "Conn", "Supervisor", "UsernsSupervisor", "ask", "calls", "check_northstar",
    "execute_once", "ok", "raised", "require_sandbox", "running_supervisor", "sandbox_available", "sha", "status",
    "stops_cleanly", "terminate", "unavailable", "value", "worker_pids", "worker_pids_of",
    "HeldCall", "held", "start_held", "wait_call", "wait_for", "wait_idle", "wait_running", "wait_states",
]
