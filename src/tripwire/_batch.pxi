# Batch ingest (included by _native.pyx): many sessions' events in one call, the tool traffic
# (calls, results, agent text, usage) observed in the C++ core without the GIL; every other row,
# and every row whose outcome needs policy (a signal fired, a limit crossed, a cost ceiling
# reached, a task's note or cap reached, a model changed), goes back to Python
# (tripwire.fleet.Fleet.observe_many).

from libc.math cimport isfinite, nearbyint
from libc.string cimport memcmp


cdef struct _Item:
    # 'c' call, 'r' result, 't' text, 'u' usage, 's' turn_start, 'p' for Python
    char kind
    int slot             # the row's session
    Py_ssize_t nfields   # fields after (session, kind)
    const char* name     # tool name; for a usage, its model (NULL: none)
    Py_ssize_t name_len
    const char* data     # call args, result payload, or a text's words
    Py_ssize_t data_len
    const char* error    # a failed result's error bytes (repeated-failure's signature)
    Py_ssize_t error_len
    const AnswerKeys* keys  # a result's [results] ignore_json_keys (NULL: none)
    int64_t context_bytes  # a result payload's bytes, for the context estimate
    uint64_t name_hash   # for a text with words, its text_key (repeated-text)
    uint64_t identity    # a call's name-run key: name_hash, or a shell tool's tool:program
    int64_t cost         # a usage's cost, nano-dollars
    int64_t input_tokens  # a usage's measured context (-1: none)
    int64_t tokens       # a usage's input + output tokens (its task's charge)
    bint failed
    bint noop
    const ToolRule* rule  # issue 39: the tool's per-tool rule (NULL: none); Batch.keep holds it
    bint has_payload
    bint has_words       # a text with a non-whitespace character
    bint unknown         # a result flagged unknown_tool (at bind: or outside known_tools)


cdef struct _Slot:
    Session* session     # NULL: the batch does not drive this session: its rows go to Python
    PyObject* engine     # borrowed: Batch.engines holds the reference
    bint has_rules       # the engine's config has per-tool rules (exempt_tools is one)
    bint call_rules      # ...and some of them judge calls
    bint blocked         # cut or halted: its calls, results and texts are not observed
    bint words_matter    # agent words would withdraw queued notes: such a text stops for Python
    bint calls_python    # its task is exhausted, or bounded and shared: calls stop for Python
    # the context estimate as of the last hand-over, and the bytes added since
    bint has_context
    int64_t measured
    int64_t carried
    int64_t added
    int64_t taken
    int64_t compact_at
    int64_t cut_tokens
    bint pending
    bint cut
    const char* model    # the context guard's model (NULL: none); Batch.keep holds the str
    Py_ssize_t model_len
    bint measured_reset  # a usage measured the context since the last hand-over
    # the cost ceiling (has_cost False: usage rows go to Python)
    bint has_cost
    int64_t spent
    int64_t baseline
    bint has_baseline
    int64_t max_turn
    int64_t ceiling
    bint cost_frozen     # halted or tripped this turn: no ceiling is checked
    bint spent_changed
    # a task bounding steps, tokens or dollars: the room below its next mark as of the last
    # hand-over (has_room False: none bounded), and what usage rows charged since; a usage row
    # that would reach a mark goes to Python
    bint has_room
    int64_t room_steps
    int64_t room_tokens
    int64_t room_nano
    int64_t used_steps
    int64_t used_tokens
    int64_t used_nano
    # the task's charge for the rows observed since the last take (task_charges()): usage
    # rows (model steps), their tokens and cost (nano-dollars), tool calls; a session whose task caps calls or time
    # has every row handed to Python, one whose task cannot be counted here (shared, ended)
    # its usage rows
    int64_t task_steps
    int64_t task_tokens
    int64_t task_nano
    int64_t task_calls
    bint charged         # listed in Batch.charged
    bint dirty           # listed in Batch.dirty: something to hand back to Python
    # counts of this run() segment, for _note(): calls observed and written back to the text
    # ring (which holds the last ``ring``), results, texts and usages, whether any result could
    # start a streak
    bint touched
    Py_ssize_t calls
    Py_ssize_t written
    Py_ssize_t results
    Py_ssize_t counted
    Py_ssize_t ring
    bint streaks


_BATCH_FIELDS = BATCH_FIELDS
# StopReason's values, as C constants for the loop that runs without the GIL
cdef int STOP_END = StopReason.END
cdef int STOP_POLICY = StopReason.POLICY
cdef int STOP_PYTHON = StopReason.PYTHON
cdef tuple _STOP_REASONS = tuple(StopReason)  # by value: END, POLICY, PYTHON
cdef Py_ssize_t MAX_CALL_IDS = _MAX_CALL_IDS
# "no row read yet": the first row's session id must be checked like every other (None is
# not a session id, and must not match a last_sid that starts as None)
cdef object _NO_SESSION = object()

cdef str _CALL = "call"
cdef str _RESULT = "result"
cdef str _TEXT = "text"
cdef str _USAGE = "usage"
cdef str _TURN_START = "turn_start"
cdef int64_t _MAX_COUNT = 1 << 62  # larger costs and spends go to Python's integers
# a usage's token counts above validate.MAX_TOKENS go to Python, whose check refuses them
from tripwire.base.validate import MAX_TOKENS as _MAX_TOKENS_OBJ
cdef int64_t _MAX_TOKENS = _MAX_TOKENS_OBJ


cdef bint _has_words(object text) except -1:
    """text_has_words (SPEC §10.11): a non-whitespace character; ASCII str scanned here."""
    cdef const unsigned char* p
    cdef Py_ssize_t i, n
    cdef unsigned char c
    if type(text) is str and PyUnicode_IS_ASCII(text):
        p = <const unsigned char*>PyUnicode_DATA(text)
        n = PyUnicode_GET_LENGTH(text)
        for i in range(n):
            c = p[i]
            # str.isspace() on ASCII: \t \n \v \f \r, \x1c-\x1f and the space
            if not (c == 32 or 9 <= c <= 13 or 28 <= c <= 31):
                return True
        return False
    return text_has_words(text)


cdef inline bint _small_count(object value):
    return value is None or (type(value) is int and 0 <= value < _MAX_COUNT)


cdef inline int64_t _room(object value):
    """A task's room as the core counts it: none (0) unless a positive int, at most
    _MAX_COUNT (more than any count of one batch reaches)."""
    if type(value) is not int or value <= 0:
        return 0
    return value if value < _MAX_COUNT else _MAX_COUNT


cdef inline bint _small_tokens(object value):
    return value is None or (type(value) is int and 0 <= value <= _MAX_TOKENS)


cdef inline char _kind_code(object kind, Py_ssize_t* nfields):
    """The row kind's code (0: unknown) and its field count."""
    if kind is _CALL or (type(kind) is str and kind == _CALL):
        nfields[0] = 3
        return b'c'
    if kind is _RESULT or (type(kind) is str and kind == _RESULT):
        nfields[0] = 6
        return b'r'
    if kind is _TEXT or (type(kind) is str and kind == _TEXT):
        nfields[0] = 1
        return b't'
    if kind is _USAGE or (type(kind) is str and kind == _USAGE):
        nfields[0] = 4
        return b'u'
    n = _BATCH_FIELDS.get(kind) if type(kind) is str else None
    if n is None:
        return 0
    nfields[0] = n
    return b's' if kind == _TURN_START else b'p'


cdef class Batch:
    """Many sessions' events observed in order, detection without the GIL.

    ``Batch(rows, convert)`` reads ``rows``, tuples ``(session_id, kind, *fields)`` (a row
    whose kind is not a str goes through ``convert(row, i)`` first), checks every one (a bad
    row raises InvalidEvent before anything is observed) and gives each session a slot, in
    order of first appearance (``session_ids``). ``bind(states)`` then describes each slot's
    session with a ``BatchState`` (``SessionBatch.state()``): the engine the batch drives
    (None: its rows go to Python), whether it is cut or halted, its context estimate, call
    ids, whether agent words matter, its cost ceiling, its task's room below the next mark (a
    usage row that would reach it stops), whether its calls go to Python. ``run()`` observes
    rows until one needs Python and returns ``(i, alerts, why)``, ``why`` a ``StopReason``:
    ``POLICY`` when row i fired a signal,
    crossed a context limit or is text that answers queued notes, ``PYTHON`` when row i is for
    Python (not observed), ``END`` at the end.
    Rows of a blocked session are not observed (its usage still counts); ``take_blocked()``
    lists them. Before Python acts on a session it takes the batch's changes (``changes()``),
    after, it updates the slot (``update_slot``); it holds every session's lock throughout.
    """

    cdef vector[_Item] items
    cdef vector[_Slot] slots
    cdef vector[Py_ssize_t] blocked_rows
    cdef vector[int] touched     # slots with rows in the current run() segment
    cdef vector[int] dirty       # slots with changes to hand back
    cdef vector[int] charged     # slots with task charges to hand back
    cdef vector[char] ids_copied  # the slot's call id map is the batch's own copy
    cdef list rows, engines, keep, ids
    cdef readonly list session_ids
    cdef dict slot_of, names  # names: row -> tool name, where it is not the row's own str
    cdef Py_ssize_t pos, n
    cdef bint bound

    def __init__(self, rows, convert=None):
        cdef Py_ssize_t i = 0, size, nfields
        cdef _Item* it
        cdef object obj, sid, kind, last_sid = _NO_SESSION, slot_obj
        cdef tuple row
        cdef int slot = -1
        cdef char code
        self.rows = list(rows)  # the tuples hold every object the items point into
        self.n = len(self.rows)
        self.pos = 0
        self.bound = False
        self.keep = []
        self.names = {}
        self.slot_of = {}
        self.session_ids = []
        self.items.resize(self.n)
        try:
            for i in range(self.n):
                obj = <object>PyList_GET_ITEM(self.rows, i)
                if type(obj) is not tuple or PyTuple_GET_SIZE(obj) < 2 or (
                        type(<object>PyTuple_GET_ITEM(obj, 1)) is not str and convert is not None):
                    if convert is not None:
                        obj = convert(obj, i)
                    if isinstance(obj, list):
                        obj = tuple(obj)
                    if type(obj) is not tuple or PyTuple_GET_SIZE(obj) < 2:
                        raise InvalidEvent(f"expected (session_id, kind, *fields), not {obj!r}")
                    self.rows[i] = obj
                row = <tuple>obj
                size = PyTuple_GET_SIZE(row)
                sid = row[0]
                kind = row[1]
                code = _kind_code(kind, &nfields)
                if code == 0:
                    raise InvalidEvent(f"unknown kind {kind!r} (known: {', '.join(_BATCH_FIELDS)})")
                if size - 2 > nfields:
                    raise InvalidEvent(f"a {kind} takes at most {nfields} fields")
                if sid is not last_sid:
                    slot_obj = self.slot_of.get(sid)
                    if slot_obj is None:
                        if type(sid) is not str or not sid:
                            raise InvalidEvent(f"a session id is a non-empty str, not {sid!r}")
                        slot_obj = len(self.session_ids)
                        self.slot_of[sid] = slot_obj
                        self.session_ids.append(sid)
                    slot = slot_obj
                    last_sid = sid
                it = &self.items[i]
                it.slot = slot
                it.nfields = size - 2
                it.kind = code
                it.context_bytes = 0
                if code == b'c':
                    self._read_call(it, row, size, i)
                elif code == b'r':
                    self._read_result(it, row, size, i)
                elif code == b't':
                    it.has_words = _has_words(row[2] if size > 2 else None)
                    if it.has_words:
                        self._read_text(it, row[2])
                elif code == b'u':
                    self._read_usage(it, row, size)
        except InvalidEvent as e:
            raise InvalidEvent(f"event {i}: {e.message}") from None

    cdef int _read_call(self, _Item* it, tuple row, Py_ssize_t size, Py_ssize_t i) except -1:
        cdef _View v
        cdef object name = row[2] if size > 2 else None
        cdef object obj
        if type(name) is not str:
            name = name_str(name)
            self.names[i] = name
        obj = _view(name, &v, False)
        if obj is not None:
            self.keep.append(obj)
        it.name, it.name_len = v.data, v.size
        it.name_hash = <uint64_t>hash(name)
        it.identity = it.name_hash  # a shell tool's is set at bind, by its engine's settings
        it.rule = NULL  # set at bind, by its engine's rules
        if size > 4:
            check_id(row[4])
        obj = _view(row[3] if size > 3 else None, &v, False)
        if obj is not None:
            self.keep.append(obj)
        it.data, it.data_len = v.data, v.size
        return 0

    cdef int _read_result(self, _Item* it, tuple row, Py_ssize_t size, Py_ssize_t i) except -1:
        cdef _View v
        cdef object name = row[2] if size > 2 else None
        cdef object payload = row[3] if size > 3 else None
        cdef object obj
        it.failed = _failed(row[4] if size > 4 else None)
        it.error = NULL
        it.error_len = 0
        if it.failed:
            obj = _error_view(row[4], &v)
            if obj is not None:
                self.keep.append(obj)
            it.error, it.error_len = v.data, v.size
        it.noop = False  # checked last, in the reference's order
        it.rule = NULL
        it.keys = NULL
        it.has_payload = False
        it.name = NULL  # a name from a call id is resolved at bind()
        it.name_len = 0
        if name is not None:
            if type(name) is not str:
                name = name_str(name)
                self.names[i] = name
            obj = _view(name, &v, False)
            if obj is not None:
                self.keep.append(obj)
            it.name, it.name_len = v.data, v.size
            it.name_hash = <uint64_t>hash(name)
        if payload is not None:
            if type(payload) is str or type(payload) is bytes or PyObject_CheckBuffer(payload):
                it.context_bytes = _utf8_length(payload)
            else:
                it.context_bytes = len(payload_bytes(payload))
            if not it.failed:
                obj = _view(payload, &v, True)
                if obj is not None:
                    self.keep.append(obj)
                it.data, it.data_len, it.has_payload = v.data, v.size, True
        # the API's validation, field by field (validate.py), in the reference's order: a no-op
        # claim is a bool, an id a str
        if size > 5 and check_no_op(row[5]) and not it.failed:
            it.noop = True
        if size > 6:
            check_id(row[6])
        it.unknown = size > 7 and bool(row[7])
        return 0

    cdef int _read_text(self, _Item* it, object text) except -1:
        """A text with words: its UTF-8 bytes (looping-text reads them, issue 39; the batch
        keeps the object that holds them) and repeated-text's key (SPEC §12.4)."""
        cdef _View v
        cdef object obj = _view(text, &v, False)
        if obj is not None:
            self.keep.append(obj)
        it.data, it.data_len = v.data, v.size
        it.name_hash = text_key(v.data, v.size)
        return 0

    cdef int _read_usage(self, _Item* it, tuple row, Py_ssize_t size) except -1:
        """The checks of Guardrails.on_usage, up front; numbers outside the fast path (huge
        counts or costs, int costs) and non-str models go to Python."""
        cdef object model = row[2] if size > 2 else None
        cdef object tokens = row[3] if size > 3 else None
        cdef object output = row[4] if size > 4 else None
        cdef object cost = row[5] if size > 5 else None
        cdef double value, nano
        cdef _View v
        if not (_small_tokens(tokens) and _small_tokens(output)) or \
                (cost is not None and type(cost) is not float):
            usage_cost_nano(tokens, output, cost)  # raises with its message when invalid
            it.kind = b'p'  # valid, but for Python's integers
            return 0
        it.cost = 0
        if cost is not None:
            value = cost
            if not isfinite(value) or value < 0:
                usage_cost_nano(tokens, output, cost)  # raises
            nano = nearbyint(value * 1e9)  # round(value * NANO): the same product, half-even
            if nano >= <double>_MAX_COUNT:
                usage_cost_nano(tokens, output, cost)  # out of range: raises, as the reference
                it.kind = b'p'
                return 0
            it.cost = <int64_t>nano
        it.input_tokens = tokens if tokens is not None else -1
        it.tokens = (tokens or 0) + (output or 0)  # each below 2**62: no overflow
        it.name = NULL
        it.name_len = 0
        if model is not None:
            if type(model) is not str:
                it.kind = b'p'
                return 0
            obj = _view(model, &v, False)
            if obj is not None:
                self.keep.append(obj)
            it.name, it.name_len = v.data, v.size
        return 0

    def bind(self, list states):
        """Each slot's session, in ``session_ids`` order, as ``SessionBatch.state()``."""
        cdef Py_ssize_t i, k
        cdef _Item* it
        cdef _Slot* slp
        cdef _View v
        cdef dict names
        cdef object name, ident, obj
        if len(states) != len(self.session_ids):
            raise ValueError(f"bind: {len(states)} states for {len(self.session_ids)} sessions")
        self.engines = []
        self.ids = []
        self.ids_copied.assign(len(states), False)
        self.slots.resize(len(states))
        # run() appends to these without the GIL: room for every slot and row up front
        self.touched.reserve(len(states))
        self.dirty.reserve(len(states))
        self.charged.reserve(len(states))
        self.blocked_rows.reserve(self.n)
        for k in range(len(states)):
            st = states[k]
            engine = st.engine
            self.engines.append(engine)
            self.ids.append(st.ids)  # copied before the batch first changes it
            slp = &self.slots[k]
            slp.engine = <PyObject*>engine
            slp.session = (<Engine>engine)._session() if engine is not None else NULL
            slp.has_rules = engine is not None and (<Engine>engine)._conf.rules is not None
            slp.call_rules = engine is not None and (<Engine>engine)._conf.call_rules
            slp.ring = (<Engine>engine)._conf.ring if engine is not None else 0
            slp.touched = slp.dirty = slp.streaks = False
            slp.calls = slp.written = slp.results = slp.counted = 0
            slp.task_steps = slp.task_tokens = slp.task_nano = slp.task_calls = 0
            slp.charged = False
            self._set_state(slp, st)
        # call ids as the rows go: a turn_start forgets them, as start_turn() does
        for i in range(self.n):
            it = &self.items[i]
            if it.kind == b'p':
                continue
            slp = &self.slots[it.slot]
            if it.kind == b's':
                self._ids_to_change(it.slot).clear()
                it.kind = b'p'
                continue
            if it.kind == b'c':
                if slp.session != NULL:  # SPEC §11.2: a shell tool's key is tool:program
                    it.identity = (<Engine>slp.engine)._identity(
                        self._name(i), it.data, it.data_len, it.name_hash)
                    if slp.call_rules:
                        it.rule = self._rule(slp, i)
                if it.nfields > 2:
                    ident = (<tuple>PyList_GET_ITEM(self.rows, i))[4]
                    if ident is not None:
                        names = self._ids_to_change(it.slot)
                        if len(names) >= MAX_CALL_IDS:  # remember_call_id(), inlined
                            names.clear()
                        names[ident] = self._name(i)
            elif it.kind == b'r' and it.name == NULL:  # a result named by its call id
                ident = (<tuple>PyList_GET_ITEM(self.rows, i))[6] if it.nfields > 4 else None
                name = (<dict>self.ids[it.slot]).get(ident, "") if ident is not None else ""
                if type(name) is not str:
                    name = name_str(name)
                self.names[i] = name
                obj = _view(name, &v, False)
                if obj is not None:
                    self.keep.append(obj)
                it.name, it.name_len = v.data, v.size
                it.name_hash = <uint64_t>hash(name)
            if slp.session == NULL:
                it.kind = b'p'
            elif it.kind == b'r':
                if slp.has_rules:  # its payload still reaches the repeat run (SPEC §10.24)
                    it.rule = self._rule(slp, i)
                it.keys = (<Engine>slp.engine)._keys_for(self._name(i))
                if it.unknown or (<Engine>slp.engine)._conf.known is not None:
                    it.unknown = (<Engine>slp.engine)._unknown(self._name(i), it.unknown)
        self.bound = True

    cdef const ToolRule* _rule(self, _Slot* sl, Py_ssize_t i) except? NULL:
        """Row ``i``'s tool's per-tool rule under its engine's config (NULL: none), kept alive
        by the batch."""
        cdef object r = _tool_rule((<Engine>sl.engine)._conf, self._name(i))
        if r is None:
            return NULL
        self.keep.append(r)
        return _rule_ptr(r)

    cdef int _set_state(self, _Slot* sl, object st) except -1:
        """The policy state of a session from its ``BatchState``; what the batch accumulated
        for it starts again from zero."""
        cdef object context = st.context
        cdef object cost = st.cost
        cdef object task = st.task
        cdef object model
        cdef _View v
        sl.blocked = st.blocked
        sl.words_matter = st.words_matter
        sl.calls_python = st.calls_to_python
        sl.has_context = context is not None
        sl.added = sl.taken = 0
        sl.measured_reset = sl.spent_changed = False
        if context is not None:
            sl.measured, sl.carried = context.measured, context.carried
            sl.compact_at, sl.cut_tokens = context.compact_at, context.cut_tokens
            sl.pending, sl.cut = context.pending, context.cut
            sl.model = NULL
            sl.model_len = 0
            model = context.model
            if model is not None:
                obj = _view(model, &v, False)
                if obj is not None:
                    self.keep.append(obj)
                self.keep.append(model)
                sl.model, sl.model_len = v.data, v.size
        sl.has_cost = cost is not None and _small_count(cost.spent) \
            and _small_count(cost.max_turn) and _small_count(cost.ceiling) \
            and (cost.baseline is None or _small_count(cost.baseline))
        if sl.has_cost:
            sl.spent = cost.spent
            sl.has_baseline = cost.baseline is not None
            sl.baseline = cost.baseline if cost.baseline is not None else 0
            sl.max_turn, sl.ceiling = cost.max_turn, cost.ceiling
            sl.cost_frozen = cost.frozen
        sl.has_room = task is not None
        sl.used_steps = sl.used_tokens = sl.used_nano = 0
        if task is not None:  # a room past the core's counts is as good as none
            sl.room_steps = _room(task.steps)
            sl.room_tokens = _room(task.tokens)
            sl.room_nano = _room(task.nano)
        return 0

    cdef dict _ids_to_change(self, int slot):
        if not self.ids_copied[slot]:
            self.ids[slot] = dict(<dict>self.ids[slot])
            self.ids_copied[slot] = True
        return <dict>self.ids[slot]

    cdef inline object _name(self, Py_ssize_t i):
        if self.names:
            name = self.names.get(i)
            if name is not None:
                return name
        return <object>PyTuple_GET_ITEM(<tuple>PyList_GET_ITEM(self.rows, i), 2)

    def run(self):
        cdef Py_ssize_t i, start = self.pos, stop = self.n, last
        cdef uint32_t mask = 0
        cdef int why = STOP_END
        cdef _Item* it
        cdef _Slot* sl
        cdef int64_t tokens, spent
        cdef Engine engine
        cdef tuple row
        cdef Canonicalizer* canon
        if not self.bound:
            raise RuntimeError("Batch.bind() first")
        if start >= self.n:
            return self.n, (), StopReason.END
        with nogil:
            canon = &thread_canonicalizer()
            for i in range(start, self.n):
                it = &self.items[i]
                if it.kind == b'p':
                    stop, why = i, STOP_PYTHON
                    break
                sl = &self.slots[it.slot]
                if it.kind == b'u':  # counted and charged even while blocked, as on_usage does
                    if not sl.has_cost:
                        stop, why = i, STOP_PYTHON
                        break
                    if sl.has_room and (sl.used_steps + 1 >= sl.room_steps
                                        or sl.used_tokens + it.tokens >= sl.room_tokens
                                        or sl.used_nano + it.cost >= sl.room_nano):
                        stop, why = i, STOP_PYTHON  # its task notes or exhausts: Python charges
                        break
                    spent = sl.spent + it.cost
                    if not sl.cost_frozen and c_cost_trips(spent, sl.has_baseline, sl.baseline,
                                                           sl.max_turn, sl.ceiling):
                        stop, why = i, STOP_PYTHON  # a cost ceiling trips: Guardrails decides
                        break
                    if sl.has_context:
                        if it.name != NULL and (sl.model == NULL or it.name_len != sl.model_len
                                                or memcmp(it.name, sl.model, it.name_len) != 0):
                            stop, why = i, STOP_PYTHON  # a new model: a new window and threshold
                            break
                        tokens = it.input_tokens if it.input_tokens >= 0 else \
                            sl.measured + tokens_for_bytes(sl.carried + sl.added)
                        if c_context_crosses(tokens, sl.compact_at, sl.pending, sl.cut_tokens,
                                             sl.cut):
                            stop, why = i, STOP_PYTHON  # a context limit crossed: the guard
                            break                       # reports it
                    self._touch(sl, it.slot)
                    sl.counted += 1
                    sl.task_steps += 1  # its task's step, tokens, dollars (task_charges())
                    sl.task_tokens += it.tokens
                    sl.task_nano += it.cost
                    if sl.has_room:
                        sl.used_steps += 1
                        sl.used_tokens += it.tokens
                        sl.used_nano += it.cost
                    self._mark_charged(sl, it.slot)
                    if it.cost:
                        sl.spent = spent
                        sl.spent_changed = True
                        self._mark_dirty(sl, it.slot)
                    if sl.has_context and it.input_tokens >= 0:
                        sl.measured = it.input_tokens  # a measured count replaces the estimate
                        sl.carried = sl.added = sl.taken = 0
                        sl.measured_reset = True
                        self._mark_dirty(sl, it.slot)
                    if sl.blocked:
                        self.blocked_rows.push_back(i)
                        continue
                    # empty-responses (SPEC §12.4); output tokens are an answer
                    mask = sl.session.observe_response(
                        it.tokens > (it.input_tokens if it.input_tokens > 0 else 0))
                    if mask:
                        stop, why = i, STOP_POLICY
                        break
                    continue
                if sl.blocked:
                    self.blocked_rows.push_back(i)
                    continue
                self._touch(sl, it.slot)
                if it.kind == b't':
                    sl.counted += 1
                    mask = sl.session.observe_text(it.has_words, it.name_hash, it.data,
                                                   <size_t>it.data_len)
                    if mask or (it.has_words and sl.words_matter):
                        stop, why = i, STOP_POLICY  # Guardrails withdraws the notes the
                        break                       # words answer
                    continue
                if it.kind == b'c':
                    if sl.calls_python:
                        stop, why = i, STOP_PYTHON  # its task charges and judges it
                        break
                    sl.calls += 1
                    sl.task_calls += 1  # its task's tool call (task_charges())
                    self._mark_charged(sl, it.slot)
                    mask = sl.session.observe_call(canon.canonicalize(
                        it.name, it.name_len, it.data, it.data_len), it.name_hash, it.identity,
                        it.rule)
                else:
                    sl.results += 1
                    if it.failed or it.noop:
                        sl.streaks = True
                    mask = sl.session.observe_result(it.name_hash, it.failed, it.noop,
                                                     it.rule, it.data, it.data_len,
                                                     it.has_payload, it.error, it.error_len,
                                                     it.keys, it.unknown)
                    if sl.has_context:
                        # every result is checked, as on_result checks the context after each
                        # (a limit already crossed, say since a turn started, cuts here too)
                        if it.context_bytes:
                            sl.added += it.context_bytes
                            self._mark_dirty(sl, it.slot)
                        tokens = sl.measured + tokens_for_bytes(sl.carried + sl.added)
                        if c_context_crosses(tokens, sl.compact_at, sl.pending, sl.cut_tokens,
                                             sl.cut):
                            stop, why = i, STOP_POLICY  # the context guard must look at this one
                            break
                if mask:
                    stop, why = i, STOP_POLICY
                    break
        last = stop if why == STOP_POLICY else stop - 1
        self._note(start, last)
        self.pos = stop + 1
        if why == STOP_END:
            return self.n, (), StopReason.END
        if why == STOP_PYTHON or not mask:
            return stop, (), _STOP_REASONS[why]
        it = &self.items[stop]
        engine = <Engine>self.slots[it.slot].engine
        row = <tuple>PyList_GET_ITEM(self.rows, stop)
        if it.kind == b't' or it.kind == b'u':
            return stop, engine._fired(mask, "", None), StopReason.POLICY
        return stop, engine._fired(
            mask, self._name(stop), (row[3] if it.nfields > 1 else None) if it.kind == b'c'
            else (row[4] if it.nfields > 2 else None)), StopReason.POLICY

    cdef inline void _touch(self, _Slot* sl, int slot) noexcept nogil:
        if not sl.touched:
            sl.touched = True
            self.touched.push_back(slot)

    cdef inline void _mark_dirty(self, _Slot* sl, int slot) noexcept nogil:
        if not sl.dirty:
            sl.dirty = True
            self.dirty.push_back(slot)

    cdef inline void _mark_charged(self, _Slot* sl, int slot) noexcept nogil:
        if not sl.charged:
            sl.charged = True
            self.charged.push_back(slot)

    cdef int _note(self, Py_ssize_t start, Py_ssize_t last) except -1:
        """The Python side of rows start..last, which run() observed (its counts are in the
        touched slots): the event counts; the streak names, in order, only for sessions that
        have streaks going; and of the calls only the last ``ring`` of each session reach its
        text ring (the rest would be overwritten within this segment), written back to front."""
        cdef Py_ssize_t i, k
        cdef _Item* it
        cdef _Slot* sl
        cdef Engine engine
        cdef tuple row
        cdef bint any_streaks = False
        for k in range(<Py_ssize_t>self.touched.size()):
            sl = &self.slots[self.touched[k]]
            engine = <Engine>sl.engine
            sl.streaks = sl.streaks or engine._failure_names is not None or \
                engine._no_op_names is not None
            if sl.streaks:
                any_streaks = True
            else:  # plain successes only, and no streak to end: just count them
                engine.events += sl.results
            engine.events += sl.counted
        for i in range(start, last + 1) if any_streaks else ():
            it = &self.items[i]
            if it.kind != b'r':
                continue
            sl = &self.slots[it.slot]
            if sl.streaks and not sl.blocked:
                row = <tuple>PyList_GET_ITEM(self.rows, i)
                (<Engine>sl.engine)._note_result(self._name(i), it.failed, it.noop,
                                                 row[4] if it.nfields > 2 else None,
                                                 it.rule.off if it.rule != NULL else 0)
        for i in range(last, start - 1, -1):
            it = &self.items[i]
            if it.kind != b'c':
                continue
            sl = &self.slots[it.slot]
            if sl.written >= sl.calls or sl.blocked:
                continue
            k = sl.written
            sl.written = k + 1
            if k < sl.ring:
                row = <tuple>PyList_GET_ITEM(self.rows, i)
                (<Engine>sl.engine)._ring_put(sl.calls - 1 - k, self._name(i),
                                              row[3] if it.nfields > 1 else None)
        for k in range(<Py_ssize_t>self.touched.size()):
            sl = &self.slots[self.touched[k]]
            if sl.calls:
                (<Engine>sl.engine)._ring_advance(sl.calls)
            sl.calls = sl.written = sl.results = sl.counted = 0
            sl.streaks = sl.touched = False
        self.touched.clear()
        return 0

    def row(self, Py_ssize_t i):
        """Row i as given (after ``convert``), its trailing fields filled with None."""
        if i < 0 or i >= self.n:
            raise IndexError(i)
        cdef tuple row = self.rows[i]
        cdef Py_ssize_t missing = _BATCH_FIELDS[row[1]] + 2 - len(row)
        return row + (None,) * missing if missing > 0 else row

    def slot(self, Py_ssize_t i):
        """Row i's session slot."""
        if i < 0 or i >= self.n:
            raise IndexError(i)
        return self.items[i].slot

    def update_slot(self, int slot, state):
        """Python acted on the session: its ``BatchState`` now."""
        self._set_state(&self.slots[slot], state)

    def take_blocked(self):
        """Rows of blocked sessions passed over since the last take."""
        rows = list(self.blocked_rows)
        self.blocked_rows.clear()
        return rows

    def changes(self, int slot=-1):
        """What the batch changed in sessions since the last take, to hand back before Python
        acts: a ``BatchChange`` per session that changed; ``slot``: that one only (the
        session Python acts on; the others' changes wait for their own turn or the end)."""
        cdef Py_ssize_t k
        cdef _Slot* sl
        out = []
        if slot >= 0:
            sl = &self.slots[slot]
            if sl.dirty:
                out.append(self._change(slot))
                for k in range(<Py_ssize_t>self.dirty.size()):
                    if self.dirty[k] == slot:  # out of the list: order does not matter
                        self.dirty[k] = self.dirty.back()
                        self.dirty.pop_back()
                        break
            return out
        for k in range(<Py_ssize_t>self.dirty.size()):
            out.append(self._change(self.dirty[k]))
        self.dirty.clear()
        return out

    cdef object _change(self, int slot):
        cdef _Slot* sl = &self.slots[slot]
        cdef int64_t added = sl.added - sl.taken
        sl.taken = sl.added
        change = BatchChange(slot, sl.spent if sl.spent_changed else None,
                             sl.measured if sl.measured_reset else None, added)
        sl.spent_changed = sl.measured_reset = sl.dirty = False
        return change

    def task_charges(self, int slot=-1):
        """What the sessions' tasks are charged for the rows observed since the last take:
        ``(slot, steps, tokens, nano, calls)`` for each session with any (``nano``: the usage
        rows' cost, nano-dollars); ``slot``: that one only (before Python acts on it). Totals,
        not rows: Python charges each task once."""
        cdef Py_ssize_t k
        cdef _Slot* sl
        out = []
        if slot >= 0:
            sl = &self.slots[slot]
            if sl.task_steps or sl.task_calls:
                out.append((slot, sl.task_steps, sl.task_tokens, sl.task_nano, sl.task_calls))
                sl.task_steps = sl.task_tokens = sl.task_nano = sl.task_calls = 0
            return out
        for k in range(<Py_ssize_t>self.charged.size()):
            sl = &self.slots[self.charged[k]]
            if sl.task_steps or sl.task_calls:
                out.append((self.charged[k], sl.task_steps, sl.task_tokens, sl.task_nano,
                            sl.task_calls))
                sl.task_steps = sl.task_tokens = sl.task_nano = sl.task_calls = 0
            sl.charged = False
        self.charged.clear()
        return out

    def call_ids(self):
        """``(slot, ids)`` for each session the batch drove whose call id -> name map the rows
        changed: its map after the batch."""
        return [(k, self.ids[k]) for k in range(<Py_ssize_t>self.slots.size())
                if self.ids_copied[k] and self.slots[k].session != NULL]
