# Included by _native.pyx: answers (SPEC §12.1) — the host's JSON keys as the C++ scanner
# reads them, and the scanner's bindings (twins: tripwire.identity.answer). Kept apart from the
# engine so each file stays one concern.


cdef class _AnswerKeys:
    """Host-configured JSON keys (``[results] ignore_json_keys``) as the C++ scanner reads
    them; one per distinct key set, shared by every engine of a fleet (``_answer_keys``)."""

    cdef AnswerKeys* keys

    def __cinit__(self, keys):
        self.keys = new AnswerKeys()
        for key in keys:
            self.keys.keys.push_back(key.encode("utf-8", "surrogatepass") if type(key) is str
                                     else bytes(key))

    def __dealloc__(self):
        del self.keys


cdef dict _KEYS = {}  # key tuple -> _AnswerKeys (a handful per process: one per config)


cdef _AnswerKeys _answer_keys(object keys):
    """The scanner's keys for a tuple of key strings; None when there are none."""
    if not keys:
        return None
    keys = tuple(keys)
    found = _KEYS.get(keys)
    if found is None:
        found = _KEYS[keys] = _AnswerKeys(keys)
    return <_AnswerKeys>found


cdef inline const AnswerKeys* _keys_ptr(_AnswerKeys keys):
    if keys is None:
        return NULL
    return keys.keys


def scan_answer(data, uint32_t classes=0xFF, keys=(), bint signature=False):
    """The scanner (native ``scan_answer``, twin of ``tripwire.identity.answer.scan``): the bytes with
    their volatile spans replaced; None in answer mode when nothing was replaced."""
    cdef Py_buffer buf
    cdef string out
    cdef bint changed
    cdef _AnswerKeys k = _answer_keys(keys)
    PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
    try:
        changed = c_scan_answer(<const char*>buf.buf, buf.len, classes, _keys_ptr(k), signature,
                                out)
    finally:
        PyBuffer_Release(&buf)
    if not changed:
        return None
    return PyBytes_FromStringAndSize(out.data(), out.size())


def answer_digest(data, uint32_t classes=0xFF, keys=()):
    """The 128-bit answer of a payload's bytes (as ``xxhash.xxh3_128_digest``), or None for
    the empty answer (twin of ``tripwire.identity.answer.answer_digest``)."""
    cdef Py_buffer buf
    cdef Hash128 h
    cdef bint has
    cdef _AnswerKeys k = _answer_keys(keys)
    PyObject_GetBuffer(data, &buf, PyBUF_SIMPLE)
    try:
        has = c_answer_digest(buf.buf, buf.len, classes, _keys_ptr(k), h)
    finally:
        PyBuffer_Release(&buf)
    if not has:
        return None
    return ((<object>h.high64 << 64) | h.low64).to_bytes(16, "big")


def error_signature(data, uint32_t classes=0xFF, keys=()):
    """A failure's error bytes in the scanner's signature mode (native ``scan_answer``, the
    twin of ``tripwire.identity.answer.signature``)."""
    return scan_answer(data, classes, keys, True)
