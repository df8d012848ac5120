# The Guardrails hot path (included by _native.pyx): the common case of on_call, on_result and
# on_text of a native Guardrails (tripwire.session.guardrails.NativeGuardrails), and the per-call lookup
# of a native Fleet. Everything else a Guardrails does (turns, cost, context, resets, policy on
# alerts) is the Python class's; this core only holds the fields every observation reads and
# calls the engine at C level.
#
# Twins: tripwire.session.core.GuardrailsCore.on_call / on_result / on_text are the same
# dispatch in Python (the reference engine's Guardrails runs them); the suite runs both. Change
# them together.
#
# Why a core at all: on_call through a Python method cost 1.9x the engine call (a Python frame,
# an RLock acquired and released through two method calls, attribute lookups, the engine's own
# argument parsing); and each object a call reaches is a memory access when a fleet's session
# is cold in cache, so the lock and the last-used time live in this object, not beside it.

cimport cython
from cpython.pythread cimport PyThread_get_thread_ident
from libc.stdlib cimport free
from libc.string cimport memset as _memset

cdef extern from "stdlib.h" nogil:
    void* aligned_alloc(size_t alignment, size_t size)


cdef struct _TableSlot:
    # One cache line of a SessionTable's index by id object.
    PyObject* key         # a session id: the very object the table's dict holds as the key
    PyObject* core        # its session, a native Guardrails (the dict holds both references)
    # Hints, written by the session's core after each call (GuardrailsCore._slot): where its
    # next call reads past the core object, so that a call on a session cold in cache starts
    # fetching them with the core object instead of after it. Addresses only, never read
    # through (they may be stale).
    double touched        # the table's last call on it (monotonic): idle over 2 ms = cold
    Session* session      # the engine's native session
    const char* engine    # the engine object
    const void* ring_key  # the call ring's slot the next call writes
    PyObject** text_slot  # the text ring's slot it writes...
    PyObject* released    # ...and the args object that slot will release


import time as _time

from tripwire.base.decision import CONTINUE as _CONTINUE, with_cancel as _with_cancel
from tripwire.base.modes import Mode as _Mode
from tripwire.base.validate import check_text as _check_text

cdef object _sleep = _time.sleep
cdef object _monotonic = _time.monotonic

cdef extern from *:
    """
    // time.monotonic() in C where it is clock_gettime(CLOCK_MONOTONIC) (Linux): the same
    // value, computed as Python does (nanoseconds / 1e9), without a call and a float object.
    #ifdef __linux__
    #include <time.h>
    static inline double tw_monotonic(void) {
        struct timespec t;
        if (clock_gettime(CLOCK_MONOTONIC, &t) != 0) return -1.0;
        return (double)((long long)t.tv_sec * 1000000000LL + t.tv_nsec) / 1e9;
    }
    #else
    static inline double tw_monotonic(void) { return -1.0; }
    #endif
    """
    double _c_monotonic "tw_monotonic"() nogil


cdef inline double _now() except? -1.0:
    """time.monotonic(), as a C double."""
    cdef double now = _c_monotonic()
    return now if now >= 0.0 else _monotonic()
cdef object _CONTINUE_ = _CONTINUE
cdef object _FEEDBACK = _Mode.FEEDBACK


cdef class CallCounter:
    """A task's tool-call count and the fast path's mark: the native twin of
    tripwire.budgets.calls.CallCounter (``Task.calls``). While one native session runs the task
    alone, the two numbers live in that session's ``GuardrailsCore`` (beside its lock, so a
    call on a session cold in cache reads no other object to charge them) and this object
    reads and writes them there; otherwise it holds them itself. ``GuardrailsCore._task``
    moves them in and out."""

    cdef GuardrailsCore _core   # the session holding the numbers, or None
    cdef long long _tool_calls  # the numbers while no session holds them
    cdef long long _call_mark

    def __cinit__(self, long long tool_calls=0, long long call_mark=0):
        self._core = None
        self._tool_calls = tool_calls
        self._call_mark = call_mark

    @property
    def tool_calls(self):
        return self._tool_calls if self._core is None else self._core._tool_calls

    @tool_calls.setter
    def tool_calls(self, long long value):
        if self._core is None:
            self._tool_calls = value
        else:
            self._core._tool_calls = value

    @property
    def call_mark(self):
        return self._call_mark if self._core is None else self._core._call_mark

    @call_mark.setter
    def call_mark(self, long long value):
        if self._core is None:
            self._call_mark = value
        else:
            self._core._call_mark = value

    cdef void _move_to(self, GuardrailsCore core):
        """The numbers into ``core`` (which holds no other task's)."""
        self._release()
        core._tool_calls = self._tool_calls
        core._call_mark = self._call_mark
        self._core = core

    cdef void _release(self):
        """The numbers back into this object; the core that held them takes the locked path."""
        cdef GuardrailsCore core = self._core
        if core is None:
            return
        self._tool_calls = core._tool_calls
        self._call_mark = core._call_mark
        core._tool_calls = 0
        core._call_mark = 0  # no call is below it: the fast path is closed
        self._core = None


cdef class GuardrailsCore:
    """The fields every observation of a native ``Guardrails`` reads, and its hot entry points.

    Holds the session's lock in place (a thread id and a depth, changed only under the GIL,
    which this module always runs under: it does not declare free-threading support, so a
    free-threaded interpreter turns the GIL back on when it imports it):
    re-entrant as ``threading.RLock``; a thread that finds it held by another sleeps in short,
    growing steps (GIL released) until it is free. ``_lock`` hands out a ``SessionLock`` view.
    """

    # first: the lock and what on_call reads (the object's first cache lines)
    cdef unsigned long _owner     # the lock: the holding thread's id...
    cdef Py_ssize_t _depth        # ...and how many times it holds it (0: free)
    cdef public object _blocked   # the halt, or this turn's cut: later events get it
    # The task's tool-call count and mark while this session runs it alone (its
    # ``CallCounter`` reads them here); else 0 and 0: every call takes the locked path.
    cdef long long _tool_calls
    cdef long long _call_mark
    cdef Engine _engine           # the watchdog, typed, for the C-level call (None unless native)
    # the engine's native session as last seen: a call on a session cold in cache starts
    # fetching it without waiting for the engine object (checked against the engine's, which
    # changes only when the engine is initialized again)
    cdef Session* _session_seen
    cdef _NextCall _next          # where the next call writes past those (_NextCall)
    cdef _TableSlot* _slot        # its slot in a native SessionTable's index (NULL if none)
    cdef public double last_used  # Fleet: when the session was last fetched (monotonic)
    cdef object _wd               # the watchdog (None in off mode)
    cdef object _run              # the task the session runs under (``_task``)...
    cdef object _bp               # ...the session's budget policy (``_budget``: the slow
    cdef dict _open               # path) and its calls without a result yet (``open``)
    cdef public dict _ids         # call id -> tool name, for results by id
    cdef public object _context   # the context guard (None when disabled)
    cdef object __weakref__

    def __cinit__(self, *args, **kwargs):
        self._owner = 0
        self._depth = 0
        self._blocked = None
        self._run = None
        self._tool_calls = 0
        self._call_mark = 0
        self._bp = None
        self._open = None
        self._wd = None
        self._engine = None
        self._session_seen = NULL
        self._next.texts = NULL
        self._slot = NULL
        self._ids = None  # made at the first call id
        self.last_used = 0.0
        self._context = None

    @property
    def _watchdog(self):
        return self._wd

    @_watchdog.setter
    def _watchdog(self, value):
        self._wd = value
        # the C-level call only for an engine whose class keeps the engine's own observe_call
        # and observe_result (a custom-signal watchdog overrides them in Python)
        cls = type(value)
        self._engine = value if isinstance(value, Engine) and \
            cls.observe_call is Engine.observe_call and \
            cls.observe_result is Engine.observe_result else None

    @property
    def _in_table_index(self):
        """Whether a native SessionTable's index holds this session now (tests)."""
        return self._slot != NULL

    @property
    def _budget(self):
        return self._bp

    @_budget.setter
    def _budget(self, policy):
        self._bp = policy
        # the policy's dict, once made, is kept for its life (None: no call id yet)
        self._open = None if policy is None else policy.open

    cdef dict _open_calls(self):
        """The budget policy's ``open``, made at the first call id (``open_calls``), kept."""
        self._open = self._bp.open_calls()
        return self._open

    @property
    def _task(self):
        return self._run

    @_task.setter
    def _task(self, task):
        """Run under ``task`` (set after this session's budget policy joined it). The
        previous task's counter leaves this core; the new one's moves in while this session
        runs the task alone (no other session charges it: one count, never a stale copy);
        a task another session runs keeps its counter where it is, and this session charges
        it on the locked path (the budget policy's ``on_call``)."""
        cdef object counter
        cdef CallCounter native
        previous = self._run
        if previous is not None and previous is not task:
            with previous.lock:
                counter = previous.calls
                if type(counter) is CallCounter and (<CallCounter>counter)._core is self:
                    (<CallCounter>counter)._release()
        if task is not None:
            with task.lock:
                counter = task.calls
                if type(counter) is CallCounter and (<CallCounter>counter)._core is self:
                    pass  # held here already
                elif all(p is self._bp for p in task.sessions):
                    if type(counter) is CallCounter:
                        native = <CallCounter>counter
                    else:
                        native = CallCounter(counter.tool_calls, counter.call_mark)
                    native._move_to(self)
                    task.use_call_counter(native)
        self._run = task

    @property
    def _lock(self):
        """The session's lock (a view of the one held in this object)."""
        return SessionLock(self)

    # -- the lock --------------------------------------------------------------------------

    cdef inline int _take(self) except -1:
        """Acquire, blocking (the hot path: free, or held by this thread already)."""
        cdef unsigned long me = PyThread_get_thread_ident()
        if self._depth == 0:
            self._owner = me
        elif self._owner != me:
            return self._wait(me, -1.0)
        self._depth += 1
        return 1

    cdef int _wait(self, unsigned long me, double timeout) except -1:
        """Held by another thread: sleep (the GIL released, so the holder runs on) and look
        again, the pause doubling from 20 µs to 1 ms. 1 when taken, 0 at the timeout."""
        cdef double deadline = -1.0
        cdef double pause = 2e-5
        if timeout == 0.0:
            return 0
        if timeout > 0.0:
            deadline = _monotonic() + timeout
        while True:
            _sleep(pause)
            if self._depth == 0:
                self._owner = me
                self._depth = 1
                return 1
            if deadline >= 0.0 and _monotonic() >= deadline:
                return 0
            if pause < 1e-3:
                pause *= 2

    cdef inline int _give(self) except -1:
        if self._depth == 0 or self._owner != PyThread_get_thread_ident():
            raise RuntimeError("cannot release un-acquired lock")
        self._depth -= 1
        if self._depth == 0:
            self._owner = 0
        return 0

    # -- observations (twins: _reference_guardrails.GuardrailsCore's) ----------------------

    def on_call(self, name, args=None, id=None):
        """A tool call the model asked for."""
        return self._on_call(name, args, id, False)

    cdef object _on_call(self, object name, object args, object id, bint cold):
        """``cold``: the session is likely cold in cache (SessionTable's ``_touch``)."""
        cdef object alerts, decision
        cdef Session* seen = self._session_seen
        cdef object pending = None
        if cold and seen != NULL:
            # a session cold in cache, found without its table slot's hints: its engine
            # object, its native session's call path and the ring slots the last call noted
            # start arriving together, while the lock, the task's counter and the call's
            # canonical form are worked out (measured: 0.3 µs and 0.1 µs of a cold call's 2)
            seen.prefetch_call_path()
            _prefetch(<void*>self._engine)
            _prefetch(<const char*><void*>self._engine + 64)
            _prefetch_next(&self._next)
        self._take()
        try:
            if id is not None and type(id) is not str:
                id = check_id(id)  # raises, in every mode: an id is a str
            if self._blocked is not None:
                return self._blocked
            # the task's tool-call counter (SPEC §7.1), as the twin: integer work below the
            # task's mark; past it (a note, the cap, a child, a clock) the budget policy decides
            if self._tool_calls + 1 < self._call_mark:
                self._tool_calls += 1
                if id is not None:
                    # the budget policy's open: without a result yet
                    (self._open if self._open is not None else self._open_calls())[id] = name
            else:
                pending = self._bp.on_call(name, id)
                if pending is not None and not pending.proceed:
                    return self._cut_at_call(pending, name, args, id)  # the watchdog sees it
            if self._wd is None:
                return _CONTINUE_ if pending is None else pending
            if id is not None:
                ids = self._ids
                if ids is None:  # made at the first call id (many hosts give none)
                    self._ids = ids = {}
                elif len(ids) >= _MAX_CALL_IDS:
                    ids.clear()
                ids[id] = name
            if self._engine is not None:
                alerts = self._engine._call_at(seen, name, args)
                self._session_seen = self._engine._s
                self._engine._note_next(&self._next)
                if self._slot != NULL:
                    _hint(self._slot, self)
            else:
                alerts = self._wd.observe_call(name, args)
            if alerts:
                decision = self._on_alerts(alerts)
                return decision if pending is None else _with_cancel(decision, pending)
            # per-call policies other than the watchdog's and the task's go here (and in the
            # twin), each turning CONTINUE into its own decision
            return _CONTINUE_ if pending is None else pending
        finally:
            self._give()

    def on_result(self, name=None, *, id=None, error=None, no_op=False, payload=None,
                  unknown_tool=False):
        """A tool's answer, by ``name`` or by the ``id`` of its call."""
        cdef object decision, alerts, context, budget
        cdef object pending = None
        self._take()
        try:
            if id is not None and type(id) is not str:
                id = check_id(id)  # raises: an id is a str
            if no_op is not False and no_op is not True:
                check_no_op(no_op)  # raises, in every mode: "false" must not count as a no-op
            if self._blocked is not None:
                return self._blocked
            budget = self._bp
            if budget.started:  # calls timed out by now are cancelled first
                pending = budget.poll_time()
                if pending is not None and not pending.proceed:
                    self._blocked = pending
                    return pending
                if not budget.on_result(id):
                    return _CONTINUE_ if pending is None else pending  # a cancelled call's
            elif not budget.on_result(id):
                return _CONTINUE_  # the late result of a call cancelled for its timeout
            decision = _CONTINUE_
            if self._wd is not None:
                if name is None:
                    ids = self._ids
                    name = ids.get(id, "") if id is not None and ids is not None else ""
                if self._engine is not None:
                    alerts = self._engine._result(name, error, no_op, payload, unknown_tool)
                else:
                    alerts = self._wd.observe_result(name, error=error, no_op=no_op,
                                                     payload=payload, unknown_tool=unknown_tool)
                if alerts:
                    decision = self._on_alerts(alerts)
            context = self._context
            if context is not None:
                if context.streamed:
                    context.streamed = False  # its bytes were counted chunk by chunk
                elif payload is not None:
                    context.observe_bytes(payload if isinstance(
                        payload, (str, bytes, bytearray, memoryview)) else payload_bytes(payload))
                decision = self._context_check(decision)
            return decision if pending is None else _with_cancel(decision, pending)
        finally:
            self._give()

    def on_text(self, text):
        """The agent's own words (not tool output, injected messages or private reasoning)."""
        if type(text) is not str:
            text = _check_text(text)  # raises: agent text is a str, in every mode
        self._take()
        try:
            if self._blocked is not None:
                return self._blocked
            budget = self._bp
            budget.last_text = text
            pending = budget.poll_time() if budget.started else None
            if pending is not None and not pending.proceed:
                self._blocked = pending
                return pending
            if self._wd is None:
                return _CONTINUE_ if pending is None else pending
            alerts = self._wd.observe_text(text)  # () but from a custom signal
            if self.mode >= _FEEDBACK and text_has_words(text):
                self._withdraw_answered()
            if alerts:
                return self._on_alerts(alerts)
            return _CONTINUE_ if pending is None else pending
        finally:
            self._give()


cdef class SessionLock:
    """A native Guardrails' lock: a view of the one its ``GuardrailsCore`` holds in place.
    Re-entrant, with ``threading.RLock``'s ``acquire``/``release`` and ``with``."""

    cdef GuardrailsCore _core

    def __cinit__(self, GuardrailsCore core):
        self._core = core

    def acquire(self, bint blocking=True, double timeout=-1):
        cdef GuardrailsCore c = self._core
        cdef unsigned long me
        if not blocking and timeout != -1:
            raise ValueError("can't specify a timeout for a non-blocking call")
        if timeout < 0 and timeout != -1:
            raise ValueError("timeout value must be a non-negative number")
        me = PyThread_get_thread_ident()
        if c._depth == 0:
            c._owner = me
        elif c._owner != me:
            if not c._wait(me, timeout if blocking else 0.0):
                return False
            return True
        c._depth += 1
        return True

    def release(self):
        self._core._give()

    def __enter__(self):
        self._core._take()
        return True

    def __exit__(self, *exc):
        self._core._give()
        return False


cdef inline void _hint(_TableSlot* slot, GuardrailsCore core) noexcept:
    """The core's current addresses into its slot (see _TableSlot)."""
    slot.session = core._session_seen
    slot.engine = <const char*><void*>core._engine
    slot.ring_key = core._next.key
    slot.text_slot = core._next.texts
    slot.released = core._next.args


# The index grows (doubles) before it is more than 4/5 full: each slot is a cache line, so at
# most half full it would cost up to 256 bytes a session (168 at 100,000 sessions) for runs a
# Robin Hood index keeps short anyway at 4/5.
cdef enum:
    _INDEX_LOAD_NUM = 4
    _INDEX_LOAD_DEN = 5


@cython.no_gc_clear  # __dealloc__ unhooks the sessions, which the dict must still hold then
cdef class SessionTable:
    """A Fleet's sessions by id (twin: ``_reference_guardrails.SessionTable``), and its
    ``on_call``: the session by id, its last-used time and its core's ``on_call`` in one C call.

    The sessions are a dict (equal ids find the same session). A call on a session cold in
    cache would wait on the id's str (for its hash), then the dict's index, then its entry, one
    after another; so the native sessions are also indexed by the id *object*: an open-addressed
    table placed by the object's address, whose slot holds the session beside the key. A caller
    that keeps its ids (an in-process harness passes the same str each time) finds the session
    in one memory access and never reads the str; an id parsed afresh (a daemon's request) is in
    cache anyway, misses the index and takes the dict. The index is kept in step with the dict
    by ``add`` and ``remove``, the only writers. Each slot is one cache line that also holds
    the session's hints (``_TableSlot``): a call on a session idle for over 2 ms starts fetching
    its engine, its native session and its ring slots together with the session's object."""

    cdef dict _by_id
    cdef object _session  # Fleet.session: creates (and restores) a session on first use
    cdef _TableSlot* _slots
    cdef size_t _mask     # slots - 1 (a power of two)
    cdef int _shift       # 64 - log2(slots): the address hash's top bits pick the slot
    cdef size_t _indexed

    def __cinit__(self, session):
        self._by_id = {}
        self._session = session
        self._slots = NULL
        self._indexed = 0
        self._resize(64)

    def __dealloc__(self):
        cdef size_t i
        if self._slots == NULL:
            return
        for i in range(self._mask + 1):
            if self._slots[i].core != NULL:  # a session may outlive its fleet
                (<GuardrailsCore>self._slots[i].core)._slot = NULL
        free(self._slots)

    # -- the dict's API, as Fleet uses it ------------------------------------------------------

    def get(self, session_id):
        return self._by_id.get(session_id)

    def __contains__(self, session_id):
        return session_id in self._by_id

    def __len__(self):
        return len(self._by_id)

    def __iter__(self):
        return iter(list(self._by_id))

    def items(self):
        return list(self._by_id.items())

    def add(self, session_id, g):
        """Keep ``g`` as the session ``session_id`` (which the table does not hold yet)."""
        if session_id in self._by_id:
            raise KeyError(f"session {session_id!r} is in the table already")
        self._by_id[session_id] = g
        if type(g) is _native_guardrails:
            if _INDEX_LOAD_DEN * (self._indexed + 1) > _INDEX_LOAD_NUM * (self._mask + 1):
                self._resize(2 * (self._mask + 1))
            self._place(<PyObject*>session_id, <PyObject*>g)
            self._indexed += 1

    def remove(self, session_id, g):
        """Drop the session ``session_id`` if it is ``g``; True when it was."""
        cdef _TableSlot* slot
        if self._by_id.get(session_id) is not g:
            return False
        if type(g) is _native_guardrails and (<GuardrailsCore>g)._slot != NULL:
            # the index first, while the dict still holds the id object its slot names (the
            # object add() was given, which session_id may only equal)
            slot = (<GuardrailsCore>g)._slot
            (<GuardrailsCore>g)._slot = NULL
            self._unplace(slot.key)
            self._indexed -= 1
        del self._by_id[session_id]
        return True

    # -- the index by id object ----------------------------------------------------------------

    def _index_finds(self, session_id):
        """The session the id *object* finds in the index, or None (tests check the index,
        and that the session's slot pointer is its slot)."""
        cdef size_t i = self._find(<PyObject*>session_id)
        if i > self._mask:
            return None
        if (<GuardrailsCore>self._slots[i].core)._slot != &self._slots[i]:
            raise RuntimeError("the session's slot pointer is not its slot")
        return <object>self._slots[i].core

    def _index_size(self):
        return self._indexed

    cdef inline size_t _home(self, PyObject* key):
        # Fibonacci hashing of the address (objects are 16-byte aligned: the low bits say nothing)
        return <size_t>((<uint64_t><size_t>key * <uint64_t>0x9E3779B97F4A7C15) >> self._shift)

    cdef inline size_t _distance(self, size_t i) noexcept:
        """How far the entry in slot ``i`` lies past its home slot."""
        return (i - self._home(self._slots[i].key)) & self._mask

    cdef inline size_t _find(self, PyObject* key) noexcept:
        """The slot holding ``key``, or a number past the last slot. Robin Hood order (``_put``):
        a run's entries lie no nearer their homes than the key would, so a miss stops at the
        first entry nearer its own home than the probe is to the key's."""
        cdef size_t i = self._home(key), d = 0
        while self._slots[i].key != key:
            if self._slots[i].key == NULL or self._distance(i) < d:
                return self._mask + 1
            i = (i + 1) & self._mask
            d += 1
        return i

    cdef void _place(self, PyObject* key, PyObject* core):
        cdef _TableSlot fresh
        _memset(&fresh, 0, sizeof(_TableSlot))
        fresh.key = key
        fresh.core = core
        _hint(&fresh, <GuardrailsCore>core)
        self._put(&fresh)

    cdef void _put(self, const _TableSlot* entry):
        """``entry`` into the index, its session (and any entry it moves) pointed at its slot.
        Robin Hood: going along the run, the entry takes the slot of the first entry nearer its
        own home than the entry is to its, which then goes on in its place; so no entry lies
        much farther from its home than the others, which lets the index fill to
        _INDEX_LOAD_NUM / _INDEX_LOAD_DEN with short runs and misses that stop early."""
        cdef _TableSlot carry = entry[0], held
        cdef size_t i = self._home(carry.key), d = 0, theirs
        while self._slots[i].key != NULL:
            theirs = self._distance(i)
            if theirs < d:
                held = self._slots[i]
                self._slots[i] = carry
                (<GuardrailsCore>carry.core)._slot = &self._slots[i]
                carry = held
                d = theirs
            i = (i + 1) & self._mask
            d += 1
        self._slots[i] = carry
        (<GuardrailsCore>carry.core)._slot = &self._slots[i]

    cdef void _unplace(self, PyObject* key):
        """Empty the id object's slot, moving the rest of its run back one slot each (no
        tombstones; the Robin Hood order stays)."""
        cdef size_t i = self._find(key), j
        if i > self._mask:
            return
        while True:
            j = (i + 1) & self._mask
            if self._slots[j].key == NULL or self._distance(j) == 0:
                _memset(&self._slots[i], 0, sizeof(_TableSlot))
                return
            self._slots[i] = self._slots[j]
            (<GuardrailsCore>self._slots[i].core)._slot = &self._slots[i]
            i = j

    cdef int _resize(self, size_t slots) except -1:
        cdef _TableSlot* old = self._slots
        cdef size_t old_slots = 0 if old == NULL else self._mask + 1
        cdef size_t i
        cdef int bits = 0
        cdef _TableSlot* fresh = <_TableSlot*>aligned_alloc(64, slots * sizeof(_TableSlot))
        if fresh == NULL:
            raise MemoryError()
        _memset(fresh, 0, slots * sizeof(_TableSlot))
        while (<size_t>1 << bits) < slots:
            bits += 1
        self._slots = fresh
        self._mask = slots - 1
        self._shift = 64 - bits
        for i in range(old_slots):
            if old[i].key != NULL:
                self._put(&old[i])
        free(old)
        return 0

    # -- the hot path -------------------------------------------------------------------------

    def on_call(self, session_id, name, args=None, id=None):
        cdef PyObject* key = <PyObject*>session_id
        cdef size_t i = self._home(key), d = 0
        cdef _TableSlot* slot
        cdef double now
        cdef object g
        while self._slots[i].key != key:
            if self._slots[i].key == NULL or self._distance(i) < d:
                # an id object the index does not hold: the dict (an equal str), else Fleet
                g = self._by_id.get(session_id)
                if g is None or type(g) is not _native_guardrails:
                    g = self._session(session_id)  # validates, creates, restores, touches
                    if not isinstance(g, GuardrailsCore):
                        return g.on_call(name, args, id)
                    return (<GuardrailsCore>g)._on_call(name, args, id, False)
                return (<GuardrailsCore>g)._on_call(name, args, id, _touch(<GuardrailsCore>g))
            i = (i + 1) & self._mask
            d += 1
        slot = &self._slots[i]
        now = _now()
        if now - slot.touched > _COLD_AFTER and slot.session != NULL:
            # idle: cold in cache, likely (see _COLD_AFTER); what the call reads past the
            # session's object starts arriving with it
            slot.session.prefetch_call_path()
            _prefetch(slot.engine)
            _prefetch(slot.engine + 64)
            _prefetch(slot.ring_key)
            _prefetch(slot.text_slot)
            _prefetch(slot.released)
        slot.touched = now
        g = <object>slot.core
        (<GuardrailsCore>g).last_used = now
        return (<GuardrailsCore>g)._on_call(name, args, id, False)


# A session last used longer ago than this is taken as cold in cache, and its call fetches
# what it will need at once (from its table slot's hints, or from its core object when found
# through the dict). Measured on a fleet of 100,000 sessions: fetching from the core object
# took 0.3 µs off a call on a session cold in memory, but added 0.1 µs to one whose lines were
# still in the processor's last-level cache (sessions revisited within a millisecond or so); a
# session's own calls come either microseconds apart (the tool calls of one model response) or
# a model response apart (hundreds of milliseconds).
cdef double _COLD_AFTER = 0.002



cdef inline int _touch(GuardrailsCore core) except -1:
    """Stamp the session's last use (now); whether it was last used long enough ago to be
    cold in cache."""
    cdef double now = _now()
    cdef bint cold = now - core.last_used > _COLD_AFTER
    core.last_used = now
    return cold


# tripwire.session.guardrails.NativeGuardrails, registered when that module defines it (SessionTable's
# exact type check: a subclass of it takes the generic path)
cdef object _native_guardrails = None


def register_guardrails(cls):
    global _native_guardrails
    _native_guardrails = cls
