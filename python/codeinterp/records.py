"""Typed views of the supervisor's messages (docs/protocol.md).

Every record is a frozen dataclass whose field names are the snake_case of the
wire names (``omittedCharacters`` is ``omitted_characters``): the wire name of
a field is derived from its Python name by :func:`wire_name` (or given in its
metadata under WIRE where the Python name differs: ``Artifact.size`` is ``bytes``),
so each name is written once, here. :func:`from_wire` builds a record from a decoded message
and checks the documented fields' presence and types; fields the client does
not know are ignored (they stay in ``raw`` of the top-level records).
"""
from __future__ import annotations

import builtins
import collections.abc
import dataclasses
import hashlib
import types
import typing
import warnings
from typing import Any, Mapping, Optional, TypeVar

from . import render
from .errors import ProtocolError

T = TypeVar("T")

# A field's metadata key for a wire name that is not wire_name(field) (Artifact.size).
WIRE = "wire"


def wire_name(field: str) -> str:
    """``omitted_characters`` -> ``omittedCharacters``."""
    head, *rest = field.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """cls's resolved annotations, computed once per class."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _convert(tp: Any, value: Any, where: str) -> Any:
    """value checked against (and built into) the annotation tp."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        (inner,) = [o for o in options if o is not type(None)]
        return _convert(inner, value, where)
    if origin in (dict, collections.abc.Mapping):
        (key_type, inner) = typing.get_args(tp)
        if not isinstance(value, Mapping):
            raise ProtocolError("%s: expected a map, got %r" % (where, type(value).__name__))
        return {_convert(key_type, k, "%s key" % where): _convert(inner, v, "%s.%s" % (where, k))
                for k, v in value.items()}
    if origin is tuple:
        (inner, _ellipsis) = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ProtocolError("%s: expected an array, got %r" % (where, type(value).__name__))
        return tuple(_convert(inner, v, "%s[%d]" % (where, i)) for i, v in enumerate(value))
    if dataclasses.is_dataclass(tp):
        return from_wire(tp, value, where)
    if tp is Any:
        return value
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if tp is int and isinstance(value, bool) or not isinstance(value, tp):
        raise ProtocolError("%s: expected %s, got %r" % (where, tp.__name__, type(value).__name__))
    return value


def from_wire(cls: type[T], m: Any, where: Optional[str] = None) -> T:
    """Build the dataclass cls from the wire map m. A field without a default must
    be present; ``raw`` (when cls has it) gets m itself."""
    where = where or cls.__name__
    if not isinstance(m, Mapping):
        raise ProtocolError("%s: expected a map, got %r" % (where, type(m).__name__))
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name == "raw":
            kwargs["raw"] = m
            continue
        key = f.metadata.get(WIRE) or wire_name(f.name)
        if key not in m:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ProtocolError("%s: %r is missing" % (where, key))
            continue
        kwargs[f.name] = _convert(hints[f.name], m[key], "%s.%s" % (where, key))
    return cls(**kwargs)


def _raw() -> Any:
    """The ``raw`` field of top-level records: the decoded message, not compared."""
    return dataclasses.field(default=None, repr=False, compare=False)


@dataclasses.dataclass(frozen=True)
class Channel:
    """A fitted output channel (stdout, stderr, the value, an exception's message or
    traceback). ``total_characters == len(text) + omitted_characters`` always."""

    text: str
    total_characters: int
    total_bytes: int
    omitted_characters: int
    omitted_bytes: int
    omitted_at: int
    replaced_characters: int


@dataclasses.dataclass(frozen=True)
class Artifact:
    """A file the code left in /outputs: its name, the media type sniffed from its
    bytes, its size (the wire's ``bytes``) and SHA-256, and the bytes themselves
    (docs/protocol.md#artifacts)."""

    name: str
    media_type: str
    size: int = dataclasses.field(metadata={WIRE: "bytes"})
    sha256: str
    data: builtins.bytes

    @property
    def bytes(self) -> int:
        """Deprecated: :attr:`size` (the old name shadowed the ``bytes`` type)."""
        warnings.warn("Artifact.bytes is deprecated; use Artifact.size", DeprecationWarning, stacklevel=2)
        return self.size

    def check(self) -> None:
        """Raise ProtocolError unless size and digest match the data."""
        if self.size != len(self.data) or hashlib.sha256(self.data).hexdigest() != self.sha256:
            raise ProtocolError("artifact %r: size or sha256 does not match its data" % self.name)


@dataclasses.dataclass(frozen=True)
class ExceptionInfo:
    """The uncaught exception: qualified type name, ``str(exc)`` and the traceback."""

    type: str
    message: Channel
    traceback: Channel


@dataclasses.dataclass(frozen=True)
class Timing:
    """Admission to finish (``elapsed_ms``/``elapsed_us``), queued and running time;
    ``worker``: how the call got its worker ("ready", "preparing", "cloned", "exec"),
    None without one (or from a supervisor that predates it)."""

    elapsed_ms: int
    elapsed_us: int
    queue_ms: int
    run_ms: int
    worker_started: bool
    worker: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class ExitStatus:
    """How the worker ended: exit code or signal, CPU time and peak RSS; the worker's
    own host uid, and its cgroup's peak memory (None without a cgroup)."""

    pid: int
    code: Optional[int]
    signal: Optional[int]
    cpu_ms: int
    max_rss_kb: int
    host_uid: Optional[int] = None
    memory_peak_bytes: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class WorkerErrorInfo:
    """The sandbox setup step that failed in the worker, and its errno."""

    stage: str
    errno: int


@dataclasses.dataclass(frozen=True)
class ProducedBy:
    """Which call of the invocation wrote a kept output (its number, 1-based) and the
    digest of the bytes it kept (docs/protocol.md#kept-outputs)."""

    call: int
    sha256: str


@dataclasses.dataclass(frozen=True)
class Source:
    """A registered source: the ``source.put`` reply, or one entry of
    ``evidence.inputs``. The attachment fields are None for a ``read_source``;
    ``media_type`` is given in evidence only. A kept output (kind ``"output"``)
    has ``media_type`` and ``produced_by``."""

    source_id: str
    kind: str
    bytes: int
    sha256: str
    original_bytes: Optional[int] = None
    original_sha256: Optional[str] = None
    media_type: Optional[str] = None
    produced_by: Optional[ProducedBy] = None


@dataclasses.dataclass(frozen=True)
class KeptOutput:
    """What became of one file an execute asked to keep (``keep_outputs``): kept as the
    source ``source_id`` of the invocation (``size``, the wire's ``bytes``, and
    ``sha256`` of the bytes kept), or not, and why (``refused``, one of
    docs/protocol.md#kept-outputs's reasons)."""

    name: str
    source_id: Optional[str] = None
    size: Optional[int] = dataclasses.field(default=None, metadata={WIRE: "bytes"})
    sha256: Optional[str] = None
    refused: Optional[str] = None

    @property
    def kept(self) -> bool:
        """True when the file became a source."""
        return self.refused is None


@dataclasses.dataclass(frozen=True)
class Runtime:
    """What ran the call: versions, worker start mode, seccomp mode, Landlock ABI,
    the worker's cgroup version, and whether the supervisor ran rootless."""

    codeinterp: str
    python: str
    worker_start: str
    seccomp: str
    landlock: Optional[int] = None
    cgroup: Optional[str] = None
    rootless: Optional[bool] = None


@dataclasses.dataclass(frozen=True)
class PolicyInfo:
    """The effective policy's name and digest (``hello`` adds ``worker_start``)."""

    name: str
    sha256: str
    worker_start: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Limits:
    """A call's limits, as in ``hello`` and in every result's evidence."""

    max_calls: int
    timeout_ms: int
    max_code_characters: int
    max_output_characters: int
    max_result_bytes: int
    memory_bytes: int
    cpu_seconds: int
    max_file_bytes: int
    max_open_files: int
    max_processes: int
    tmp_bytes: int
    max_message_bytes: int
    max_source_bytes: int
    max_source_ids: int
    max_artifacts: Optional[int] = None
    max_artifact_bytes: Optional[int] = None
    # Percent of one CPU each worker's cgroup may use, 0 = off (None: an older supervisor).
    cpu_bandwidth_percent: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What identifies the call: the code's digest, the mounted inputs, the runtime,
    the policy and the limits."""

    code_sha256: str
    code_characters: int
    inputs: tuple[Source, ...]
    runtime: Runtime
    policy: PolicyInfo
    limits: Limits


@dataclasses.dataclass(frozen=True)
class Result:
    """A ``result`` message: one per admitted call, whatever its outcome."""

    id: int
    call_id: int
    outcome: str
    limit: Optional[str]
    detail: Optional[str]
    partial: bool
    stdout: Channel
    stderr: Channel
    result: Optional[Channel]
    exception: Optional[ExceptionInfo]
    elapsed_ms: int
    timing: Timing
    exit_status: Optional[ExitStatus]
    worker_error: Optional[WorkerErrorInfo]
    evidence: Evidence
    # None when the call had no /outputs (maxArtifacts: 0); in name order.
    artifacts: Optional[tuple[Artifact, ...]] = None
    omitted_artifacts: int = 0
    omitted_artifact_bytes: int = 0
    # None unless the request had keep_outputs; one entry per file asked for.
    kept_outputs: Optional[tuple[KeptOutput, ...]] = None
    raw: Any = _raw()

    @property
    def ok(self) -> bool:
        """True for the outcome ``ok`` (the code ran to its end without an uncaught
        exception; it says nothing about whether it computed the right thing)."""
        return self.outcome == "ok"

    def model_text(self) -> str:
        """The bounded text the model sees (docs/client.md, "Model text and progress
        cards")."""
        return render.model_text(self)

    def card(self) -> str:
        """The user's card for the finished call: metadata only."""
        return render.result_card(self)


@dataclasses.dataclass(frozen=True)
class Progress:
    """A ``progress`` message: metadata only, for display, never for the model."""

    id: int
    call_id: int
    phase: str
    elapsed_ms: int
    queue_position: Optional[int]
    stdout_characters: int
    stderr_characters: int
    stdout_omitted_characters: int
    stderr_omitted_characters: int
    outcome: Optional[str]
    # Entries of /outputs and their size, never names; None without /outputs.
    artifacts: Optional[int] = None
    artifact_bytes: Optional[int] = None
    raw: Any = _raw()

    def card(self) -> str:
        """A one-line progress card for users: metadata only (docs/client.md, "Model
        text and progress cards")."""
        return render.progress_card(self)


@dataclasses.dataclass(frozen=True)
class Hello:
    """The ``hello`` reply: protocol and versions, policy, limits, outcome names, the
    cgroup version in force and whether the supervisor runs rootless."""

    protocol: int
    version: str
    python: str
    policy: PolicyInfo
    limits: Limits
    outcomes: tuple[str, ...]
    cgroup: Optional[str] = None
    rootless: Optional[bool] = None
    raw: Any = _raw()


@dataclasses.dataclass(frozen=True)
class CallState:
    """One unfinished call in ``status``: ``state`` is ``queued``, ``starting`` or
    ``running`` (the worker has reported its sandbox complete); ``worker_pid`` is the
    worker's host pid once running."""

    call_id: int
    state: str
    worker_pid: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class Histogram:
    """A duration histogram of ``status`` (``queueWaitMs``, ``runTimeMs``): the bucket
    bounds in ms, the cumulative count at or below each, the sum in ms and the count
    (the +Inf bucket)."""

    le_ms: tuple[int, ...]
    counts: tuple[int, ...]
    sum_ms: float
    count: int


@dataclasses.dataclass(frozen=True)
class Status:
    """The ``status`` reply: process-wide counters of the supervisor."""

    queued: int
    running: int
    capacity: int
    admitted_total: int
    started_total: int
    finished_total: int
    max_running_seen: int
    worker_start_failures: int
    worker_start_failures_in_row: int
    last_worker_start_error: Optional[str]
    connections: int
    pid: int
    worker_start: str
    zygote_pid: Optional[int]
    zygote_generation: int
    zygote_ready: bool
    # Readiness, the memory gate, uptime and versions (None from a supervisor that
    # predates them; docs/protocol.md#status).
    ready: Optional[bool] = None
    not_ready_cause: Optional[str] = None
    not_ready_detail: Optional[str] = None
    zygote_state: Optional[str] = None
    memory_gate_holds: Optional[int] = None
    memory_gate_holding: Optional[bool] = None
    memory_gate_held_ms: Optional[int] = None
    uptime_ms: Optional[int] = None
    start_time_unix_ms: Optional[int] = None
    version: Optional[str] = None
    python: Optional[str] = None
    policy_name: Optional[str] = None
    policy_sha256: Optional[str] = None
    calls: tuple[CallState, ...] = ()
    # Connections refused at accept, by reason (peer_not_allowed, max_connections,
    # max_connections_per_peer), and closed for idleness.
    connections_refused: Optional[dict[str, int]] = None
    connections_idle_closed: Optional[int] = None
    # Finished calls by outcome, and the queue-wait and run-time histograms.
    outcomes: Optional[dict[str, int]] = None
    queue_wait_ms: Optional[Histogram] = None
    run_time_ms: Optional[Histogram] = None
    # started_total by how each call got its worker (ready, preparing, cloned, exec).
    workers_started_by: Optional[dict[str, int]] = None
    # The pages each new worker of the serving zygote maps ahead of its preparation
    # (0: none, or no zygote serves).
    zygote_pages_ahead: Optional[int] = None
    raw: Any = _raw()


@dataclasses.dataclass(frozen=True)
class InvocationInfo:
    """The ``invocation.open`` reply."""

    invocation: str
    max_calls: int
    idle_ttl_ms: int
