# Declarations of the C++ core (native/*.h) for the Cython bindings in _native.pyx.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libcpp cimport bool as cbool
from libcpp.string cimport string
from libcpp.string_view cimport string_view
from libcpp.vector cimport vector


cdef extern from "hash.h" namespace "tw" nogil:
    cdef struct Hash128:
        uint64_t low64
        uint64_t high64
    uint64_t xxh3_64(const void* data, size_t length)
    Hash128 xxh3_128(const void* data, size_t length)


cdef extern from "answer.h" namespace "tw" nogil:
    cdef cppclass AnswerKeys:
        vector[string] keys
    cbool scan_answer(const char* data, size_t length, uint32_t classes, const AnswerKeys* keys,
                      cbool signature, string& out) except +
    cbool answer_digest(const void* data, size_t length, uint32_t classes,
                        const AnswerKeys* keys, Hash128& digest)
    uint64_t error_signature_key(const char* data, size_t length, uint32_t classes,
                                 const AnswerKeys* keys)


cdef extern from "canonical.h" namespace "tw" nogil:
    cdef cppclass CanonicalCall:
        uint64_t key
        uint64_t rest
        cbool is_object

    cdef cppclass Canonicalizer:
        Canonicalizer() except +
        const CanonicalCall& canonicalize(const char* name, size_t name_len,
                                          const char* args, size_t args_len) except +
        cbool canonical_form(const char* args, size_t args_len, string& out) except +

    Canonicalizer& thread_canonicalizer()
    cbool is_path_key(const char* key, size_t length)
    string clean_path_string(const char* path, size_t length) except +


cdef extern from "thresholds.h" namespace "tw" nogil:
    cbool cost_trips(int64_t spent, cbool has_baseline, int64_t baseline, int64_t max_turn,
                     int64_t ceiling)
    cbool context_crosses(int64_t tokens, int64_t compact_at, cbool pending, int64_t cut_tokens,
                          cbool cut)


cdef extern from "shell.h" namespace "tw" nogil:
    string_view shell_program(const char* args, size_t length, string& scratch) except +


cdef extern from "tokens.h" namespace "tw" nogil:
    uint64_t tokens_for_bytes(uint64_t n)
    size_t utf8_length_ucs1(const uint8_t* s, size_t n)
    size_t utf8_length_ucs2(const uint16_t* s, size_t n)
    size_t utf8_length_ucs4(const uint32_t* s, size_t n)


cdef extern from "detectors.h" namespace "tw" nogil:
    cdef cppclass CallHistory:
        uint32_t size()
    cdef cppclass RepeatDetector:
        uint32_t run
        uint8_t poll
        cbool awaits(uint64_t name_hash)
    cdef cppclass CycleDetector:
        uint32_t period
    cdef cppclass DensityDetector:
        uint32_t count
        uint32_t length
        uint32_t first_age
    cdef cppclass NameRunDetector:
        uint32_t run
    cdef cppclass SilenceDetector:
        uint32_t run
        uint32_t streak() noexcept
    cdef cppclass StreakDetector:
        uint32_t run
    cdef cppclass RepeatedFailureDetector:
        uint32_t last
    cdef cppclass RecycledCallsDetector:
        uint32_t run
    cdef cppclass RepeatedTextDetector:
        uint32_t run
    cdef cppclass EmptyResponsesDetector:
        uint32_t run
    cdef cppclass CompactionStormDetector:
        uint32_t turn
        uint32_t run
    cdef cppclass PersistentWarningsDetector:
        uint32_t run
        uint32_t signals
    cdef cppclass TextLaps:
        uint32_t laps
        uint32_t period
    cdef cppclass LoopingTextDetector:
        TextLaps last
    TextLaps tail_laps(const char* text, size_t len, uint32_t max_period,
                       uint32_t threshold) noexcept
    uint64_t text_key(const char* text, size_t len) except +


cdef extern from "stats.h" namespace "tw" nogil:
    cdef cppclass SessionStats:
        uint32_t peak[15]


cdef extern from "session.h" namespace "tw" nogil:
    cdef struct SignalBitName:
        const char* id
        uint32_t bit
    const SignalBitName kSignalBits[]
    const size_t kSignalCount

    # issue 39: a tool's per-tool rule (tripwire.signals.tool_rules.ToolRule)
    cdef struct ToolRule:
        uint32_t off
        uint32_t repeat_threshold
        uint32_t name_threshold
        uint32_t repeated_failure_threshold

    cdef struct Settings:
        uint32_t enabled
        uint32_t repeat_threshold
        uint32_t poll_plateau
        uint32_t cycle_max_period
        uint32_t cycle_cycles
        uint32_t density_window
        uint32_t density_threshold
        int32_t density_defer_run
        int32_t density_defer_cycle_period
        uint32_t name_threshold
        uint32_t failure_threshold
        uint32_t no_op_threshold
        uint32_t no_new_state_threshold
        uint32_t silence_threshold
        uint32_t digest_memory
        uint32_t repeated_failure_threshold
        uint32_t answer_volatile
        uint32_t recycled_threshold
        uint32_t recycled_window
        uint32_t unknown_tool_threshold
        uint32_t repeated_text_threshold
        uint32_t empty_responses_threshold
        uint32_t compaction_per_turn
        uint32_t compaction_in_a_row
        uint32_t persistent_warnings_threshold
        uint32_t warn_signals
        uint32_t looping_text_threshold
        uint32_t looping_text_max_period

    cdef cppclass Session:
        # one block: the session and its rings (Session::create / Session::destroy)
        @staticmethod
        Session* create(const Settings& s) except +
        @staticmethod
        void destroy(Session* session)
        uint32_t observe_call(const CanonicalCall& c, uint64_t name_hash,
                              uint64_t identity, const ToolRule* rule) except +
        void prefetch_call_path() noexcept
        const void* next_key() noexcept
        const void* next_flags() noexcept
        uint32_t observe_result(uint64_t name_hash, cbool failed, cbool no_op,
                                const ToolRule* rule,
                                const void* payload, size_t payload_len, cbool has_payload,
                                const char* error, size_t error_len, const AnswerKeys* keys,
                                cbool unknown)
        uint32_t observe_text(cbool has_words, uint64_t key, const char* text, size_t len)
        uint32_t observe_response(bint produced)
        uint32_t observe_compaction()
        void end_turn()
        void turn_boundary()
        void reset()
        void retract_calls(uint32_t calls)
        size_t state_bytes()
        void enable_stats() except +
        SessionStats* stats "stats.get"()
        CallHistory history
        RepeatDetector repeat
        CycleDetector cycle
        uint32_t attempt_calls
        DensityDetector density
        NameRunDetector name
        SilenceDetector silence
        StreakDetector failures
        StreakDetector no_ops
        StreakDetector stale
        RepeatedFailureDetector repeated_failure
        RecycledCallsDetector recycled
        StreakDetector unknown_tool
        RepeatedTextDetector text
        EmptyResponsesDetector empty
        CompactionStormDetector storm
        PersistentWarningsDetector persistent
        LoopingTextDetector looping
