// Benchmark only, never shipped: the canonical-key and observe_call entry points of the C++
// core bound with pybind11 instead of Cython, doing the same work per call as
// tripwire/_native.pyx (UTF-8 read in place, the str's cached hash as the name key, the event
// count and the (name, args) text ring), so benchmarks/test_bench_binding.py measures the
// binding layer alone. Built by that benchmark (CMakeLists.txt beside this file).
#include <pybind11/pybind11.h>

#include "canonical.h"
#include "session.h"

namespace py = pybind11;

namespace {

tw::Canonicalizer& canon() {
    static tw::Canonicalizer c;
    return c;
}

struct View {
    const char* data;
    Py_ssize_t size;
};

View utf8(const py::handle& s) {
    View v{nullptr, 0};
    v.data = PyUnicode_AsUTF8AndSize(s.ptr(), &v.size);
    if (!v.data) throw py::error_already_set();
    return v;
}

class Engine {
public:
    explicit Engine(const py::object& settings) : session_(to_settings(settings)) {
        ring_ = std::max(session_.settings.density_window,
                         session_.settings.cycle_max_period * session_.settings.cycle_cycles);
        texts_ = py::list(2 * ring_);
    }

    py::object observe_call(const py::str& name, const py::str& args) {
        const View n = utf8(name), a = utf8(args);
        const uint32_t mask = session_.observe_call(
            canon().canonicalize(n.data, n.size, a.data, a.size),
            static_cast<uint64_t>(PyObject_Hash(name.ptr())));
        ++events_;
        texts_[2 * pos_] = name;
        texts_[2 * pos_ + 1] = args;
        if (++pos_ == ring_) pos_ = 0;
        if (mask) return py::int_(mask);  // the Cython engine builds alerts here (rare)
        return py::tuple();
    }

    size_t events() const { return events_; }

private:
    static tw::Settings to_settings(const py::object& s) {
        tw::Settings c{};
        auto u = [&](const char* name) { return s.attr(name).cast<uint32_t>(); };
        auto i = [&](const char* name) { return s.attr(name).cast<int32_t>(); };
        c.enabled = u("enabled");
        c.repeat_threshold = u("repeat_threshold");
        c.cycle_max_period = u("cycle_max_period");
        c.cycle_cycles = u("cycle_cycles");
        c.density_window = u("density_window");
        c.density_threshold = u("density_threshold");
        c.density_defer_run = i("density_defer_run");
        c.density_defer_cycle_period = i("density_defer_cycle_period");
        c.name_threshold = u("name_threshold");
        c.failure_threshold = u("failure_threshold");
        c.no_op_threshold = u("no_op_threshold");
        c.no_new_state_threshold = u("no_new_state_threshold");
        c.silence_threshold = u("silence_threshold");
        c.digest_memory = u("digest_memory");
        return c;
    }

    tw::Session session_;
    py::list texts_;
    uint32_t ring_ = 0, pos_ = 0;
    size_t events_ = 0;
};

}  // namespace

PYBIND11_MODULE(tw_pybind, m) {
    m.def("canonical_key", [](const py::str& name, const py::str& args) {
        const View n = utf8(name), a = utf8(args);
        return canon().canonicalize(n.data, n.size, a.data, a.size).key;
    });
    py::class_<Engine>(m, "Engine")
        .def(py::init<const py::object&>())
        .def("observe_call", &Engine::observe_call)
        .def_property_readonly("events", &Engine::events);
}
