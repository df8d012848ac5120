# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
# cython: embedsignature=True, initializedcheck=False
# distutils: language = c++
"""Thin Cython bindings of the C++ core: buffers in, small integers out.

The same names and behaviour as ``tripwire.engine.reference`` (the executable spec). str and bytes
arguments are read in place (``PyUnicode_AsUTF8AndSize`` / the bytes buffer), never copied;
other types go through the shared normalization of ``tripwire.base.inputs``.
"""

from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer, PyObject_CheckBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.object cimport PyObject
from cpython.list cimport PyList_GET_ITEM
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memset
from libcpp.string cimport string
from libcpp.string_view cimport string_view

from libcpp.vector cimport vector

from tripwire._native_core cimport (
    AnswerKeys, answer_digest as c_answer_digest, error_signature_key, scan_answer as c_scan_answer,
    CanonicalCall, Canonicalizer, Hash128, Session, SessionStats, Settings, ToolRule, kSignalBits,
    kSignalCount, clean_path_string, is_path_key as c_is_path_key,
    shell_program as c_shell_program, thread_canonicalizer, tokens_for_bytes,
    utf8_length_ucs1, utf8_length_ucs2, utf8_length_ucs4, xxh3_128 as c_xxh3_128,
    xxh3_64 as c_xxh3_64, cost_trips as c_cost_trips, context_crosses as c_context_crosses,
    text_key,
)

from tripwire.engine.batch import BATCH_FIELDS, BatchChange, StopReason
from tripwire.base.inputs import (
    args_bytes, error_failed, name_str, no_op_flag, payload_bytes, text_has_words,
)
from tripwire.base.inputs import MAX_CALL_IDS as _MAX_CALL_IDS
from tripwire.base.money import usage_cost_nano
from tripwire.signals.repeated_failure import error_bytes as _error_bytes
from tripwire.errors import InvalidEvent
from tripwire.base.validate import check_id, check_no_op

IMPLEMENTATION = "native"

#: The engine API, the same in ``_reference`` (tests/test_parity.py checks it).
__all__ = [
    "IMPLEMENTATION", "Engine", "TokenEstimator", "Batch", "canonical_key", "canonical_form",
    "is_path_key", "clean_path", "xxh3_64", "xxh3_128", "utf8_length", "estimate_tokens",
    "cost_trips", "context_crosses", "error_signature", "scan_answer",
    "answer_digest",
]

def _signal_bits():
    cdef size_t i
    return {kSignalBits[i].id.decode(): kSignalBits[i].bit for i in range(kSignalCount)}


def _settings_fields():
    cdef Settings c
    memset(&c, 0, sizeof(c))
    cdef dict fields = c
    return tuple(fields)


#: session.h's signal bits by signal id, and the Settings fields the bindings fill (with the
#: struct's size): tests/test_parity.py checks both against the Python catalogue.
SIGNAL_BITS = _signal_bits()
SETTINGS_FIELDS = _settings_fields()
SETTINGS_BYTES = sizeof(Settings)


cdef extern from "Python.h":
    # Declared without an exception clause: NULL (a str with lone surrogates) is handled here.
    const char* _utf8_or_null "PyUnicode_AsUTF8AndSize"(object s, Py_ssize_t* size)
    void PyErr_Clear()
    bint PyUnicode_IS_ASCII(object s)
    int PyUnicode_KIND(object s)
    void* PyUnicode_DATA(object s)
    Py_ssize_t PyUnicode_GET_LENGTH(object s)


# One canonicalizer for calls made under the GIL; its scratch buffers are reused, so once
# warmed up a call allocates nothing.
cdef Canonicalizer* _canon = new Canonicalizer()
# Scratch for shell_program (under the GIL, as _canon).
cdef string _shell_scratch


def shell_program(args):
    """The program word of a shell tool's call args, by the C++ core (for the tests)."""
    cdef _View a
    cdef object keep = _view(args, &a, False)
    cdef string_view program = c_shell_program(a.data, a.size, _shell_scratch)
    return PyBytes_FromStringAndSize(program.data(), program.size())


cdef struct _View:
    const char* data
    Py_ssize_t size


cdef inline object _view(object value, _View* v, bint as_payload):
    """Point `v` at value's UTF-8 bytes without copying; returns an object to keep alive
    (a converted copy for types without a fast path), or None."""
    cdef object keep
    if type(value) is str:
        v.data = _utf8_or_null(value, &v.size)
        if v.data != NULL:
            return None
        PyErr_Clear()  # lone surrogates: pass them through, as the reference does
        keep = (<str>value).encode("utf-8", "surrogatepass")
    elif type(value) is bytes:
        v.data = PyBytes_AS_STRING(value)
        v.size = PyBytes_GET_SIZE(value)
        return None
    elif as_payload:
        keep = payload_bytes(value)
    else:
        keep = args_bytes(value)
    v.data = PyBytes_AS_STRING(keep)
    v.size = PyBytes_GET_SIZE(keep)
    return keep


cdef inline object _error_view(object error, _View* v):
    """Point `v` at the bytes a failure's signature is read from (``error_bytes``), without
    copying a str or bytes error; returns an object to keep alive, or None."""
    cdef object keep
    if type(error) is str or type(error) is bytes:
        return _view(error, v, False)
    keep = _error_bytes(error)
    v.data = PyBytes_AS_STRING(keep)
    v.size = PyBytes_GET_SIZE(keep)
    return keep


cdef inline bint _failed(object error) except -1:
    if error is None or error is False:
        return False
    if type(error) is str:
        return len(<str>error) > 0
    return error_failed(error)


cdef extern from *:
    """
    // An engine's text ring: a tuple only its engine holds, its slots replaced in place. The
    // new item is in place before the old one is released (whose finalizer may run code).
    // A collection untracks a tuple that holds only untracked objects (str, None): it is
    // tracked again before it holds one that can be in a cycle.
    static inline void tw_ring_set(PyObject* ring, Py_ssize_t i, PyObject* item) {
        PyObject* old = PyTuple_GET_ITEM(ring, i);
        Py_INCREF(item);
        PyTuple_SET_ITEM(ring, i, item);
        if (PyObject_IS_GC(item) && !PyObject_GC_IsTracked(ring)) PyObject_GC_Track(ring);
        Py_DECREF(old);
    }
    static inline PyObject** tw_ring_items(PyObject* ring) { return ((PyTupleObject*)ring)->ob_item; }
    // The ring grown to `size` slots, the new ones None. Its items are moved, not copied, when
    // only the engine holds it: a copy would touch each item's reference count, and the items
    // of a session's earlier calls are cold in cache.
    static PyObject* tw_ring_grown(PyObject* ring, Py_ssize_t size) {
        Py_ssize_t n = PyTuple_GET_SIZE(ring), i;
        PyObject* grown = PyTuple_New(size);
        PyObject** from = ((PyTupleObject*)ring)->ob_item;
        PyObject** to;
        if (grown == NULL) return NULL;
        to = ((PyTupleObject*)grown)->ob_item;
        if (Py_REFCNT(ring) == 1) {
            memcpy(to, from, n * sizeof(PyObject*));
            memset(from, 0, n * sizeof(PyObject*));  // the old tuple then releases nothing
        } else {
            for (i = 0; i < n; i++) { Py_INCREF(from[i]); to[i] = from[i]; }
        }
        for (i = n; i < size; i++) { Py_INCREF(Py_None); to[i] = Py_None; }
        return grown;
    }
    // The value unchanged, but the compiler cannot see that it is: after `if (s != o->s) s =
    // o->s;` it would otherwise use the load o->s on both paths, and a caller's work through
    // its own copy of s would wait for o to arrive from memory.
    template <typename T> static inline T* tw_opaque(T* p) { __asm__("" : "+r"(p)); return p; }
    """
    void _ring_set "tw_ring_set"(tuple ring, Py_ssize_t i, object item)
    void _prefetch "__builtin_prefetch"(const void* address) nogil
    Session* _opaque "tw_opaque"(Session* p) nogil
    PyObject** _ring_items "tw_ring_items"(tuple ring)
    tuple _ring_grown "tw_ring_grown"(PyObject* ring, Py_ssize_t size)


cdef struct _NextCall:
    # Where a session's next call will read and write past its engine object and native
    # session's first lines, noted at the end of a call (GuardrailsCore._next): the call
    # ring's slot and flags, the text ring's slot and the objects it releases. A call on
    # a session cold in cache fetches them at once, instead of each after the line that
    # holds its address. Addresses only: never read through (they may be stale).
    const void* key
    const void* flags
    PyObject** texts
    PyObject* name
    PyObject* args


cdef inline void _prefetch_next(const _NextCall* at) noexcept nogil:
    if at.texts != NULL:
        _prefetch(at.key)
        _prefetch(at.flags)
        _prefetch(at.texts)
        _prefetch(at.name)
        _prefetch(at.args)


include "_answers.pxi"
include "_config.pxi"


cdef class Engine:
    """One session's detector state in the C++ core. See ``tripwire.engine.reference.Engine``."""

    # first: what a call reads (the object's first line; a fleet's session is cold)
    cdef Session* _s
    # The recent calls' (name, args) objects, for the texts of cycle and density alerts.
    # (name, args, name, args, ...): one tuple that only this engine sees, its slots written
    # in place (_ring_set), so a call reaches the slots in the tuple's own block, not through
    # a list's separate item array (a fleet's sessions are cold in cache; every object a call
    # reaches is a memory access). A tuple keeps the items visible to the GC. It grows with
    # the first calls (_grow_texts): the slot of the call n calls after the ring was emptied
    # is n modulo the ring, in any size, and a slot past its end holds None.
    cdef tuple _texts
    cdef uint32_t _pos                # the next call's slot
    cdef uint32_t _cap                # the calls _texts has room for (here: no extra line read)
    cdef public Py_ssize_t events
    cdef _EngineConfig _conf          # shared by the engines of one configuration
    cdef list _failure_names
    cdef list _no_op_names

    implementation = IMPLEMENTATION

    def __cinit__(self, *args, **kwargs):
        self._s = NULL
        self._texts = ()
        self._pos = self._cap = 0

    def __dealloc__(self):
        Session.destroy(self._s)

    def __init__(self, settings):
        self._engine_init(settings)

    def _engine_init(self, settings, config=None):
        """(Re)build the engine for ``settings``, which came from ``config`` (a WatchdogConfig,
        or None)."""
        cdef Settings c = _settings(settings)
        if max(c.density_window, c.cycle_max_period * c.cycle_cycles) < 1:
            raise ValueError("the call ring needs at least one slot (density_window >= 1)")
        Session.destroy(self._s)
        self._s = NULL
        self._s = Session.create(c)
        self._conf = _engine_config(settings, config)
        self.events = 0
        self._empty_texts()
        self._clear_texts()

    @property
    def settings(self):
        return None if self._conf is None else self._conf.settings

    @property
    def config(self):
        """The WatchdogConfig the settings came from."""
        return None if self._conf is None else self._conf.config

    @config.setter
    def config(self, value):
        self._session()
        self._conf = _engine_config(self._conf.settings, value)

    cdef inline Session* _session(self) except NULL:
        if self._s == NULL:
            raise RuntimeError("Engine.__init__ was not called")
        return self._s

    cdef void _clear_texts(self):
        # None until a failure or a no-op arrives: most sessions never need them
        self._failure_names = None
        self._no_op_names = None

    # -- observations ----------------------------------------------------------------------

    def observe_call(self, name, args=None):
        return self._call(name, args)

    cdef object _call(self, object name, object args):
        """observe_call, callable from C."""
        return self._call_at(self._s, name, args)

    cdef object _call_at(self, Session* s, object name, object args):
        """observe_call, on ``s`` when it is still this engine's native session (so a caller
        that kept the session's address, GuardrailsCore, works on it while this object is
        still arriving from memory)."""
        cdef _View n, a
        cdef object keep_name, keep_args
        if type(name) is not str:
            name = name_str(name)
        keep_name = _view(name, &n, False)
        keep_args = _view(args, &a, False)
        # checked after the views, which may run the caller's code (an args object's
        # conversion): the engine initialized again frees the session the caller saw
        if s != self._s:
            s = self._session()
        else:
            s = _opaque(s)  # go on with the caller's copy, not the load it equals (see _opaque)
        # str caches its hash, so the name keys are free (but a shell tool's identity)
        cdef uint64_t name_hash = <uint64_t>hash(name)
        cdef uint64_t identity = self._identity(name, a.data, a.size, name_hash)
        # issue 39: a tool's own thresholds, looked up only when some rule judges calls
        cdef object rule = _tool_rule(self._conf, name) if self._conf.call_rules else None
        cdef uint32_t mask = s.observe_call(
            _canon.canonicalize(n.data, n.size, a.data, a.size), name_hash, identity,
            _rule_ptr(rule))
        # last: its branches on the text ring (cold when the session is) would, mispredicted,
        # throw away the canonicalization and the session's fetches done past them (measured:
        # noted first, the cold call took 0.2 µs longer)
        self._note_call(name, args)
        if mask:
            return self._fired(mask, name, args)
        return ()

    cdef inline uint64_t _identity(self, object name, const char* args, Py_ssize_t size,
                                   uint64_t name_hash) except? 0:
        """The name-run detector's key: the name's hash, mixed with the program word's for a
        shell tool (the C++ twin of identity.shell.tool_identity)."""
        cdef string_view program
        cdef frozenset shell = self._conf.shell
        if not shell or name not in shell:
            return name_hash
        program = c_shell_program(args, size, _shell_scratch)
        if program.size() == 0:
            return name_hash
        return name_hash ^ ((c_xxh3_64(program.data(), program.size()) | 1)
                            * <uint64_t>0x9E3779B97F4A7C15)

    cdef inline void _note_next(self, _NextCall* out) noexcept:
        """Where the next call on this engine will write (see ``_NextCall``)."""
        cdef Session* s = self._s
        cdef PyObject** texts = _ring_items(self._texts) + 2 * <Py_ssize_t>self._pos
        if s == NULL:
            out.texts = NULL
            return
        out.key = s.next_key()
        out.flags = s.next_flags()
        out.texts = texts
        if self._pos < self._cap:
            out.name = texts[0]
            out.args = texts[1]
        else:  # the slot is not there yet: the call makes it
            out.name = out.args = NULL

    cdef inline int _note_call(self, object name, object args) except -1:
        """The Python side of an observed call: the event count and the text ring."""
        cdef uint32_t pos = self._pos
        self.events += 1
        if pos >= self._cap:
            self._grow_texts(pos)
        _ring_set(self._texts, 2 * <Py_ssize_t>pos, name)
        _ring_set(self._texts, 2 * <Py_ssize_t>pos + 1, args)
        pos += 1
        # the shared ring size is read only at the end of the room the ring has (once a lap)
        if pos >= self._cap and pos == self._conf.ring:
            pos = 0
        self._pos = pos
        return 0

    cdef int _grow_texts(self, Py_ssize_t at) except -1:
        """Room in the text ring for the slot of call ``at`` (and then some): 4 calls at the
        first call, doubling up to the ring's size. A fleet's many short sessions never hold
        the whole ring; one that runs on moves its slots twice (default ring: at its 5th and
        9th call, about 0.15 µs each)."""
        cdef Py_ssize_t ring = self._conf.ring
        cdef Py_ssize_t calls = 4 if self._cap == 0 else 2 * self._cap
        if calls <= at:
            calls = at + 1
        if calls > ring:
            calls = ring
        self._texts = _ring_grown(<PyObject*>self._texts, 2 * calls)  # no reference taken
        self._cap = <uint32_t>calls
        return 0

    cdef void _empty_texts(self):
        self._texts = ()
        self._pos = self._cap = 0

    cdef inline int _ring_put(self, Py_ssize_t offset, object name, object args) except -1:
        """Batch ingest: the text ring entry of the call ``offset`` places after the current
        position (the batch writes only the calls the ring will still hold)."""
        cdef Py_ssize_t at = (self._pos + offset) % self._conf.ring
        if at >= self._cap:
            self._grow_texts(at)
        _ring_set(self._texts, 2 * at, name)
        _ring_set(self._texts, 2 * at + 1, args)
        return 0

    cdef inline void _ring_advance(self, Py_ssize_t calls):
        self.events += calls
        self._pos = <uint32_t>((self._pos + calls) % self._conf.ring)

    cdef inline void _note_result(self, object name, bint failed, bint noop, object error,
                                  uint32_t off=0):
        """The Python side of an observed result: the names the streak texts quote (``off``:
        the tool's rule's off bits; a streak it turns off neither counts the result nor ends)."""
        self.events += 1
        if failed:
            if off & _FAILURE_BIT:
                return
            if self._failure_names is None:
                self._failure_names = []
            if len(self._failure_names) < self._conf.failure_threshold:
                self._failure_names.append(name)
            return
        if self._failure_names is not None and not off & _FAILURE_BIT:
            self._failure_names = None
        if off & _NO_OP_BIT:
            return
        if noop:
            if self._no_op_names is None:
                self._no_op_names = []
            if len(self._no_op_names) < self._conf.no_op_threshold:
                self._no_op_names.append(name)
        elif self._no_op_names is not None:
            self._no_op_names = None

    def observe_result(self, name="", error=None, no_op=False, payload=None,
                       unknown_tool=False):
        return self._result(name, error, no_op, payload, unknown_tool)

    cdef inline bint _unknown(self, object name, object flagged) except -1:
        """unknown_tool.is_unknown: flagged, or a name outside the host's known tools."""
        cdef frozenset known = self._conf.known
        return bool(flagged) or (known is not None and name not in known)

    cdef object _result(self, object name, object error, object no_op, object payload,
                        object unknown_tool=False):
        """observe_result, callable from C (as _call)."""
        cdef Session* s = self._session()
        cdef bint failed, noop, unknown
        cdef object rule
        cdef const ToolRule* rp
        cdef uint32_t mask
        cdef _View p
        cdef object keep
        cdef Py_buffer buf
        cdef const AnswerKeys* keys
        if type(name) is not str:
            name = name_str(name)
        # the same name hash as observe_call's: the repeat run takes its tool's results
        cdef uint64_t h = <uint64_t>hash(name)
        failed = _failed(error)
        if no_op is False:
            noop = False
        elif no_op is True:
            noop = not failed
        else:
            noop = no_op_flag(no_op, failed)  # raises: the claim must be a bool
        cdef _EngineConfig conf = self._conf
        # one compare on the common result: no flag, no known_tools
        unknown = (unknown_tool is not False or conf.known is not None) and \
            self._unknown(name, unknown_tool)
        # issue 39: the tool's rule (exempt_tools is one), a dict lookup by the name's hash
        rule = _tool_rule(conf, name) if conf.rules is not None else None
        rp = _rule_ptr(rule)
        self._note_result(name, failed, noop, error, rp.off if rp != NULL else 0)
        keys = self._keys_for(name)
        if failed:  # repeated-failure reads the error's text (SPEC §7.3)
            keep = _error_view(error, &p)
            mask = s.observe_result(h, True, False, rp, NULL, 0, False, p.data, p.size,
                                    keys, unknown)
        elif payload is None or (rp != NULL and (rp.off & _PAYLOAD_READERS) == _PAYLOAD_READERS
                                 and not s.repeat.awaits(h)):
            mask = s.observe_result(h, False, noop, rp, NULL, 0, False, NULL, 0, keys,
                                    unknown)
        elif type(payload) is not str and type(payload) is not bytes and PyObject_CheckBuffer(payload):
            PyObject_GetBuffer(payload, &buf, PyBUF_SIMPLE)  # read in place
            try:
                mask = s.observe_result(h, False, noop, rp, buf.buf, buf.len, True, NULL, 0,
                                        keys, unknown)
            finally:
                PyBuffer_Release(&buf)
        else:
            keep = _view(payload, &p, True)
            mask = s.observe_result(h, False, noop, rp, p.data, p.size, True, NULL, 0, keys,
                                    unknown)
        if mask:
            return self._fired(mask, name, error)
        return ()

    cdef inline const AnswerKeys* _keys_for(self, object name):
        """The [results] ignore_json_keys the answers of tool ``name`` ignore (NULL: none)."""
        cdef _EngineConfig conf = self._conf
        cdef object k
        if conf.keys_by_tool is None:
            return _keys_ptr(conf.keys)
        k = conf.keys_by_tool.get(name)
        return _keys_ptr(<_AnswerKeys>k if k is not None else conf.keys)

    def observe_text(self, text):
        cdef Session* s = self._session()
        cdef bint words = text_has_words(text)
        self.events += 1
        cdef _View v
        cdef object keep
        if not words:
            return self._event(s.observe_text(False, 0, NULL, 0))
        # repeated-text's key (SPEC §12.4); looping-text reads the bytes (issue 39)
        keep = _view(text, &v, False)
        return self._event(s.observe_text(True, text_key(v.data, v.size), v.data, v.size))

    def observe_response(self, bint produced=False):
        """One model response (a usage event, or the host's ``on_response``); ``produced``: its
        usage reported output tokens."""
        cdef Session* s = self._session()
        self.events += 1
        return self._event(s.observe_response(produced))

    def observe_compaction(self):
        """The history was compacted (a recorded event, or ``Guardrails.compact``)."""
        cdef Session* s = self._session()
        self.events += 1
        return self._event(s.observe_compaction())

    cdef inline object _event(self, uint32_t mask):
        return self._fired(mask, "", None) if mask else ()

    def end_turn(self):
        self.events += 1
        self._session().end_turn()  # compaction-storm: does the turn end in agent text?
        self.turn_boundary()
        return ()

    def turn_boundary(self):
        """SPEC §10.5: the no-op run and the seen-set (with its run) are turn-scoped; §12.4:
        unknown-tool's run, the repeated text and the compactions of a turn."""
        self._session().turn_boundary()
        self._no_op_names = None

    def reset(self):
        """SPEC §10.8: clear every detector's state, the seen-set included."""
        self._session().reset()
        self.events += 1
        self._empty_texts()
        self._clear_texts()
        return ()

    def count_event(self):
        """Advance the event index for an event the watchdog does not observe."""
        self.events += 1

    def _retract_calls(self, Py_ssize_t calls):
        """The last `calls` calls were refused by the host's gate and the turn ended (see
        ``tripwire.engine.reference.Engine._retract_calls``)."""
        cdef Py_ssize_t pos, ring
        if calls <= 0:
            return
        self._session().retract_calls(<uint32_t>min(calls, 0xFFFFFFFF))
        # the text ring follows the call ring (cdivision: keep the modulo non-negative)
        ring = self._conf.ring
        pos = <Py_ssize_t>self._pos - calls % ring
        self._pos = <uint32_t>(pos + ring if pos < 0 else pos)

    def _fired(self, mask, name, detail):  # supplied by tripwire.engine.watchdog.Watchdog
        raise NotImplementedError

    # -- what alert texts need -------------------------------------------------------------

    def recent_call(self, Py_ssize_t age):
        """The (name, args) of the call `age` calls ago (0 = the latest)."""
        cdef Py_ssize_t ring = self._conf.ring
        cdef Py_ssize_t i = (<Py_ssize_t>self._pos - 1 - age) % ring
        if i < 0:
            i += ring
        if i >= self._cap:
            return None, None  # a slot no call has reached yet
        return self._texts[2 * i], self._texts[2 * i + 1]

    @property
    def calls_held(self):
        """How many recent calls ``recent_call`` can return (the call ring's size)."""
        return self._session().history.size()

    @property
    def repeat_run(self):
        return self._session().repeat.run

    @property
    def repeat_poll(self):
        """What the current run's results have shown (``signals.repeated_tool_call.Poll``)."""
        return self._session().repeat.poll

    @property
    def attempt_calls(self):
        """Calls since the last result, model response or turn boundary (the reference's)."""
        return self._session().attempt_calls

    @property
    def cycle_period(self):
        return self._session().cycle.period

    @property
    def dominant(self):
        cdef Session* s = self._session()
        return s.density.count, s.density.length, s.density.first_age

    @property
    def name_run(self):
        return self._session().name.run

    @property
    def silent_calls(self):
        return self._session().silence.streak()

    @property
    def failure_streak(self):
        return self._session().failures.run

    @property
    def failure_names(self):
        return list(self._failure_names or ())

    @property
    def no_op_run(self):
        return self._session().no_ops.run

    @property
    def no_op_names(self):
        return list(self._no_op_names or ())

    @property
    def stale_results(self):
        return self._session().stale.run

    @property
    def same_error_failures(self):
        """Failures of the last failed result's (tool, error signature) since a success."""
        return self._session().repeated_failure.last

    @property
    def recycled_run(self):
        """Results in a row each answering a repeated call with its earlier answer."""
        return self._session().recycled.run

    @property
    def unknown_tool_run(self):
        return self._session().unknown_tool.run

    @property
    def repeated_text_run(self):
        return self._session().text.run

    @property
    def empty_responses(self):
        return self._session().empty.run

    @property
    def compaction_storm(self):
        """(compactions in this turn, since a turn last ended in agent text)."""
        cdef Session* s = self._session()
        return s.storm.turn, s.storm.run

    @property
    def persistent_warnings(self):
        """(warn alerts since the last new answer, the bits of the signals they were)."""
        cdef Session* s = self._session()
        return s.persistent.run, s.persistent.signals

    @property
    def looping_text(self):
        """(laps, period in bytes) of the last message's end."""
        cdef Session* s = self._session()
        return s.looping.last.laps, s.looping.last.period

    # -- statistics mode (tripwire corpus stats) ------------------------------------------

    def enable_stats(self):
        """Keep, from now on, the peak of each signal's compared quantity (``stats``)."""
        self._session().enable_stats()

    @property
    def stats(self):
        """Per signal, in SPEC §1 order, the largest value its threshold was compared with;
        None unless ``enable_stats()`` was called."""
        cdef SessionStats* st = self._session().stats()
        if st == NULL:
            return None
        return tuple(st.peak[i] for i in range(kSignalCount))

    @property
    def state_bytes(self):
        """Bytes of native detector state this session holds (struct plus its rings)."""
        return self._session().state_bytes()


# ------------------------------------------------------------------------------------------
# Batch ingest: many sessions' calls and results, detection without the GIL


include "_batch.pxi"


# ------------------------------------------------------------------------------------------
# The Guardrails hot path: the dispatcher's common case, and the fleet's per-call lookup


include "_guardrails.pxi"


# ------------------------------------------------------------------------------------------
# Canonical keys and hashes (the scanner's bindings: _answers.pxi)


def canonical_key(name, args=None):
    """The 64-bit canonical key of a call (SPEC §2.3)."""
    cdef _View n, a
    if type(name) is not str:
        name = name_str(name)
    keep_name = _view(name, &n, False)
    keep_args = _view(args, &a, False)
    return _canon.canonicalize(n.data, n.size, a.data, a.size).key


def canonical_form(args):
    """The canonical JSON of object args, or None when they are compared as raw bytes."""
    cdef _View a
    cdef string out
    keep = _view(args, &a, False)
    if not _canon.canonical_form(a.data, a.size, out):
        return None
    return PyBytes_FromStringAndSize(out.data(), out.size())


def is_path_key(str key):
    cdef bytes b = key.encode("utf-8", "surrogatepass")
    return c_is_path_key(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))


def clean_path(str path):
    cdef bytes b = path.encode("utf-8", "surrogatepass")
    cdef string out = clean_path_string(PyBytes_AS_STRING(b), PyBytes_GET_SIZE(b))
    return out.decode("utf-8", "surrogatepass")


def xxh3_64(data):
    """XXH3-64, seed 0: bit-identical with ``xxhash.xxh3_64_intdigest``."""
    cdef Py_buffer buf
    PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
    try:
        return c_xxh3_64(buf.buf, buf.len)
    finally:
        PyBuffer_Release(&buf)


def xxh3_128(data):
    """XXH3-128, seed 0: bit-identical with ``xxhash.xxh3_128_intdigest``."""
    cdef Py_buffer buf
    cdef Hash128 h
    PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
    try:
        h = c_xxh3_128(buf.buf, buf.len)
    finally:
        PyBuffer_Release(&buf)
    return (<object>h.high64 << 64) | h.low64


# ------------------------------------------------------------------------------------------
# The threshold predicates (native/thresholds.h), for the differential test


def cost_trips(long long spent, baseline, long long max_turn, long long ceiling):
    return c_cost_trips(spent, baseline is not None, baseline if baseline is not None else 0,
                        max_turn, ceiling)


def context_crosses(long long tokens, long long compact_at, bint pending, long long cut_tokens,
                    bint cut):
    return c_context_crosses(tokens, compact_at, pending, cut_tokens, cut)


# ------------------------------------------------------------------------------------------
# Streaming token estimate


include "_tokens.pxi"
