# Included by _native.pyx: the streaming token estimate (twin: tripwire.engine.tokens), bytes
# counted in place (a str's UTF-8 length from its code points, a buffer's length), never encoded.


cdef Py_ssize_t _utf8_length(object chunk) except -1:
    cdef Py_buffer buf
    cdef Py_ssize_t n
    cdef int kind
    if type(chunk) is str:
        n = PyUnicode_GET_LENGTH(chunk)
        if PyUnicode_IS_ASCII(chunk):
            return n
        kind = PyUnicode_KIND(chunk)
        if kind == 1:
            return utf8_length_ucs1(<const uint8_t*>PyUnicode_DATA(chunk), n)
        if kind == 2:
            return utf8_length_ucs2(<const uint16_t*>PyUnicode_DATA(chunk), n)
        return utf8_length_ucs4(<const uint32_t*>PyUnicode_DATA(chunk), n)
    if type(chunk) is bytes:
        return PyBytes_GET_SIZE(chunk)
    if chunk is None:
        return 0
    if not PyObject_CheckBuffer(chunk):
        raise InvalidEvent(f"expected str or a bytes-like buffer, not {type(chunk).__name__}")
    PyObject_GetBuffer(chunk, &buf, PyBUF_SIMPLE)
    n = buf.len
    PyBuffer_Release(&buf)
    return n


def utf8_length(chunk):
    """Bytes a chunk occupies as UTF-8 (buffers: their byte length), without encoding it."""
    return _utf8_length(chunk)


def estimate_tokens(unsigned long long byte_count):
    return tokens_for_bytes(byte_count)


cdef class TokenEstimator:
    """Counts unmeasured bytes; ``tokens`` is ceil(bytes / 3) over the total, so any chunking
    of the same bytes gives the same count (SPEC §10.14)."""

    cdef public unsigned long long bytes

    def __init__(self):
        self.bytes = 0

    def feed(self, chunk):
        """Add one chunk (str, bytes or any buffer); returns the running token estimate."""
        self.bytes += _utf8_length(chunk)
        return tokens_for_bytes(self.bytes)

    def add_bytes(self, unsigned long long count):
        """Add a byte count measured elsewhere (batch ingest hands its totals over this way)."""
        self.bytes += count
        return tokens_for_bytes(self.bytes)

    @property
    def tokens(self):
        return tokens_for_bytes(self.bytes)

    def reset(self):
        self.bytes = 0
