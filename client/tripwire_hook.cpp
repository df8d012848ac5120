// tripwire-hook: the resident hook server's client, without a Python start.
//
// A harness runs its hook command once per event. `tripwire hook <harness> ...` is a Python
// process that pays the interpreter's start before it can hand the event to the resident
// server (`tripwire hook serve`); this executable takes the same arguments and does only the
// hand-over: it connects to $TRIPWIRE_HOOK_SOCKET, sends its arguments, its working directory,
// the variables that locate the default store and its stdin, and writes the server's answer
// (stdout, stderr, exit status) as its own.
//
// Whenever the server cannot answer (nothing listening, a broken answer) it runs `tripwire hook
// <the same arguments>` instead, with the stdin it already read, so the event is always decided
// exactly as the Python command decides it.
//
// Without $TRIPWIRE_HOOK_SOCKET it uses a server of its own, started on demand: the first event
// finding none starts `tripwire hook serve` detached (it exits after 15 idle minutes) and hands
// the event to it once it listens. That server's socket lives in a directory only this user
// can enter, and its name is a hash of what the answer depends on besides the event: this
// executable (its path and modification time: an upgrade gets a new server) and the variables
// the hook reads (TRIPWIRE_*, PYTHON*, HOME, XDG_STATE_HOME, XDG_CONFIG_HOME, CODEX_HOME). So a
// server only ever answers clients whose environment is its own. None is started when
// $TRIPWIRE_HOOK_SERVER is "off", or when $TRIPWIRE_STORE_KEY holds a secret key: a server is
// a process an agent running as the same user could stand in for, which a secret key exists
// to rule out (docs/harnesses/claude-code.md).
//
// A thin client of an authority (privilege separation, docs/security.md): with --authority PATH
// among the arguments, or $TRIPWIRE_AUTHORITY, the event goes to the authority on PATH (a
// `tripwire hook serve --allow-user` run as another user, which decides with its own store)
// and nowhere else: no automatic server, no event run here. When the authority cannot be
// reached, does not answer within kAuthorityMs or answers garbage, it runs `tripwire hook
// <the same arguments>` with $TRIPWIRE_AUTHORITY_DOWN set to the reason, which renders the
// harness's denial (under enforce, the default) without trying the authority again; if even
// that cannot be started, under enforce it exits 2 with one line on stderr: every harness reads
// exit 2 as "block".
//
// The frame (both directions start with the magic "TWH1"; integers are little-endian u32):
//   request:  "TWH1", count, then count strings (u32 length, bytes): argc, the arguments,
//             cwd, $TRIPWIRE_STORE, $XDG_STATE_HOME, $HOME, stdin
//   answer:   "TWH1", exit status (u32), stdout (u32 length, bytes), stderr (likewise)
// src/tripwire/cli/hook_server.py reads and writes the same frames.

#include <cerrno>
#include <csignal>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <algorithm>

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

namespace {

constexpr char kMagic[4] = {'T', 'W', 'H', '1'};
constexpr size_t kMaxStdin = (16u << 20) + 1;  // the hook reads at most this (MAX_STDIN + 1)
constexpr size_t kMaxAnswer = 64u << 20;       // the server's answer limit (hook_server._LIMIT)
constexpr int kTimeoutMs = 10000;              // the server's own per-connection timeout
constexpr int kAuthorityMs = 8000;             // cli/hook.py AUTHORITY_TIMEOUT
int g_timeout_ms = kTimeoutMs;
constexpr const char* kIdleSeconds = "900";    // an automatic server's life without requests
constexpr int kStartMs = 3000;                 // how long an event waits for a server starting
constexpr time_t kRespawnSeconds = 30;         // no second start this soon (one that crashes)

void put_u32(std::string& out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void put_str(std::string& out, const std::string& s) {
    put_u32(out, static_cast<uint32_t>(s.size()));
    out += s;
}

uint32_t get_u32(const std::string& in, size_t& pos, bool& ok) {
    if (!ok || in.size() - pos < 4) { ok = false; return 0; }
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
        v |= static_cast<uint32_t>(static_cast<unsigned char>(in[pos + i])) << (8 * i);
    }
    pos += 4;
    return v;
}

std::string get_str(const std::string& in, size_t& pos, bool& ok) {
    uint32_t n = get_u32(in, pos, ok);
    if (!ok || in.size() - pos < n) { ok = false; return {}; }
    std::string s = in.substr(pos, n);
    pos += n;
    return s;
}

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

bool read_stdin(std::string& out) {
    char buf[65536];
    while (out.size() < kMaxStdin) {
        ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
        if (n == 0) return true;
        if (n < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        out.append(buf, static_cast<size_t>(n));
    }
    return true;  // more than the hook reads: it refuses the payload, as the command does
}

bool write_all(int fd, const char* p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        p += w;
        n -= static_cast<size_t>(w);
    }
    return true;
}

bool wait_for(int fd, short events) {
    struct pollfd p = {fd, events, 0};
    for (;;) {
        int r = poll(&p, 1, g_timeout_ms);
        if (r > 0) return true;
        if (r == 0 || errno != EINTR) return false;
    }
}

int connect_to(const std::string& path) {
    struct sockaddr_un addr;
    if (path.empty() || path.size() >= sizeof addr.sun_path) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    std::memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.data(), path.size());
    if (connect(fd, reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

// The server's answer, or false (the caller runs the event itself).
bool ask(int fd, const std::string& request, int& code, std::string& out, std::string& err) {
    if (!wait_for(fd, POLLOUT) || !write_all(fd, request.data(), request.size())) return false;
    shutdown(fd, SHUT_WR);
    std::string answer;
    char buf[65536];
    for (;;) {
        if (!wait_for(fd, POLLIN)) return false;
        ssize_t n = read(fd, buf, sizeof buf);
        if (n == 0) break;
        if (n < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        answer.append(buf, static_cast<size_t>(n));
        if (answer.size() > kMaxAnswer) return false;
    }
    if (answer.size() < 4 || std::memcmp(answer.data(), kMagic, 4) != 0) return false;
    size_t pos = 4;
    bool ok = true;
    uint32_t status = get_u32(answer, pos, ok);
    out = get_str(answer, pos, ok);
    err = get_str(answer, pos, ok);
    if (!ok || pos != answer.size() || status > 255) return false;
    code = static_cast<int>(status);
    return true;
}

// `tripwire`, the console script beside this executable (a harness may run hooks with a PATH
// that does not hold the environment's bin directory), else the first one on PATH.
std::string python_command() {
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        std::string dir(self, static_cast<size_t>(n));
        size_t slash = dir.rfind('/');
        if (slash != std::string::npos) {
            std::string beside = dir.substr(0, slash) + "/tripwire";
            if (access(beside.c_str(), X_OK) == 0) return beside;
        }
    }
    return "tripwire";
}

// Run `tripwire hook <args>`: exec'd when stdin was not read yet, else fed what was read.
// `unrunnable`: the status when it cannot be started (0: fail open, as the hook does).
int run_python(int argc, char** argv, const std::string* input, int unrunnable = 0) {
    std::string command = python_command();
    std::vector<char*> args;
    args.push_back(const_cast<char*>("tripwire"));
    args.push_back(const_cast<char*>("hook"));
    for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
    args.push_back(nullptr);
    if (input == nullptr) {
        execvp(command.c_str(), args.data());
        std::fprintf(stderr, "tripwire-hook: cannot run %s: %s; no decision\n", command.c_str(),
                     std::strerror(errno));
        return 0;  // fail open, as the hook does
    }
    int pipefd[2];
    if (pipe(pipefd) != 0) return unrunnable;
    pid_t child = fork();
    if (child < 0) return unrunnable;
    if (child == 0) {
        dup2(pipefd[0], STDIN_FILENO);
        close(pipefd[0]);
        close(pipefd[1]);
        execvp(command.c_str(), args.data());
        std::fprintf(stderr, "tripwire-hook: cannot run %s: %s; no decision\n", command.c_str(),
                     std::strerror(errno));
        _exit(unrunnable);
    }
    close(pipefd[0]);
    signal(SIGPIPE, SIG_IGN);
    write_all(pipefd[1], input->data(), input->size());
    close(pipefd[1]);
    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {}
    return WIFEXITED(status) ? WEXITSTATUS(status) : 0;
}


// A directory only this user can enter: made (0700) when missing, refused when it is a
// symbolic link, someone else's, or open to others.
bool private_dir(const std::string& dir) {
    mkdir(dir.c_str(), 0700);
    struct stat st;
    return lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() &&
           (st.st_mode & 077) == 0;
}

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : s) { h ^= c; h *= 1099511628211ull; }
    return h;
}

bool served_variable(const std::string& entry) {
    static const char* const exact[] = {"HOME=", "XDG_STATE_HOME=", "XDG_CONFIG_HOME=",
                                        "CODEX_HOME="};
    if (entry.rfind("TRIPWIRE_HOOK_SOCKET=", 0) == 0) return false;
    if (entry.rfind("TRIPWIRE_", 0) == 0 || entry.rfind("PYTHON", 0) == 0) return true;
    for (const char* e : exact) {
        if (entry.rfind(e, 0) == 0) return true;
    }
    return false;
}

// The automatic server's socket for this executable and environment ("" when there is none:
// turned off, a secret key, no private directory, a path too long for a socket).
std::string auto_socket() {
    std::string mode = env("TRIPWIRE_HOOK_SERVER");
    if (mode == "off" || mode == "0" || mode == "false" || mode == "no") return {};
    if (env("TRIPWIRE_STORE_KEY").find_first_not_of(" \t\r\n") != std::string::npos) return {};
    std::string dir = env("XDG_RUNTIME_DIR");
    if (!dir.empty() && dir[0] == '/') {
        dir += "/tripwire";
    } else {
        std::string tmp = env("TMPDIR");
        dir = (tmp.empty() || tmp[0] != '/' ? std::string("/tmp") : tmp) + "/tripwire-" +
              std::to_string(getuid());
    }
    if (!private_dir(dir)) return {};
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    struct stat st;
    if (n <= 0 || stat("/proc/self/exe", &st) != 0) return {};
    std::string fingerprint(self, static_cast<size_t>(n));
    fingerprint += '\0' + std::to_string(st.st_mtim.tv_sec) + '.' +
                   std::to_string(st.st_mtim.tv_nsec);
    std::vector<std::string> served;
    for (char** e = environ; *e; ++e) {
        if (served_variable(*e)) served.emplace_back(*e);
    }
    std::sort(served.begin(), served.end());
    for (const std::string& v : served) fingerprint += '\0' + v;
    char name[40];
    std::snprintf(name, sizeof name, "/hook-%016llx.sock",
                  static_cast<unsigned long long>(fnv1a(fingerprint)));
    std::string path = dir + name;
    return path.size() < sizeof(sockaddr_un{}.sun_path) ? path : std::string();
}

// Starts `tripwire hook serve` on `path`, detached (its own session, no terminal, none of this
// process's descriptors: a harness waits for the hook's stdout to close), unless a server
// holds the lock (one is starting) or one was started less than kRespawnSeconds ago (one that
// crashes is not started again on every event). The server's lines go to `path`.log.
void start_server(const std::string& path, const std::string& command) {
    std::string lock = path + ".lock";
    int fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return;
    struct stat st;
    bool start = flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &st) == 0 &&
                 (st.st_size == 0 || time(nullptr) - st.st_mtime >= kRespawnSeconds);
    if (start && (ftruncate(fd, 0) != 0 || write(fd, "0\n", 2) != 2)) start = false;  // its time
    close(fd);                         // the lock goes with it: the server takes it
    if (!start) return;
    pid_t child = fork();
    if (child < 0) return;
    if (child == 0) {
        setsid();
        if (fork() != 0) _exit(0);  // the server is no child of the harness's process
        int null = open("/dev/null", O_RDONLY);
        std::string log_path = path + ".log";
        int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0600);
        if (null < 0 || log < 0) _exit(0);
        dup2(null, STDIN_FILENO);
        dup2(log, STDOUT_FILENO);
        dup2(log, STDERR_FILENO);
        for (int i = 3; i < 1024; ++i) close(i);
        if (chdir("/") != 0) _exit(0);
        const char* args[] = {"tripwire", "hook", "serve", "--socket", path.c_str(),
                              "--idle-timeout", kIdleSeconds, nullptr};
        execvp(command.c_str(), const_cast<char**>(args));
        _exit(0);
    }
    while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {}
}

// Whether a server is starting on `path`: one holds the lock (it listens soon after taking
// it), or one was started less than kStartMs ago and has not taken it yet (the lock file
// still holds the "0" of the start, not the process id a server writes when it takes it).
bool starting(const std::string& path) {
    std::string lock = path + ".lock";
    int fd = open(lock.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return false;
    struct stat st;
    struct timespec now;
    char head[2] = {0, 0};
    // a shared lock for an instant: a server that takes the lock then retries for a while
    bool held = flock(fd, LOCK_SH | LOCK_NB) != 0;
    bool unclaimed = pread(fd, head, 2, 0) == 2 && head[0] == '0' && head[1] == '\n';
    bool recent = fstat(fd, &st) == 0 && clock_gettime(CLOCK_REALTIME, &now) == 0 &&
                  (now.tv_sec - st.st_mtim.tv_sec) * 1000 +
                  (now.tv_nsec - st.st_mtim.tv_nsec) / 1000000 < kStartMs;
    close(fd);
    return held || (unclaimed && recent);
}

// A connection to the automatic server, started if none listens (-1: the event runs here).
int auto_connect(const std::string& path) {
    if (path.empty()) return -1;
    int fd = connect_to(path);
    if (fd >= 0) return fd;
    start_server(path, python_command());
    struct timespec pause = {0, 5 * 1000 * 1000};
    for (int waited = 0; waited < kStartMs && starting(path); waited += 5) {
        nanosleep(&pause, nullptr);
        fd = connect_to(path);
        if (fd >= 0) return fd;
    }
    return -1;
}

// The surrounding white space a shell profile may leave, trimmed.
std::string trim(const std::string& s) {
    size_t a = s.find_first_not_of(" \t\n"), b = s.find_last_not_of(" \t\n");
    return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

// The value of option `name` among the arguments ("" when absent).
std::string option(int argc, char** argv, const char* name) {
    for (int i = 1; i + 1 < argc; ++i) {
        if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
    }
    return {};
}

// The authority could not answer: the Python command renders the harness's fallback (a denial
// under enforce), told the reason; when it cannot be run, exit 2 ("block") under enforce.
int authority_down(int argc, char** argv, const std::string& input, const std::string& reason) {
    setenv("TRIPWIRE_AUTHORITY_DOWN", reason.c_str(), 1);
    std::string mode = trim(option(argc, argv, "--mode"));
    bool enforce = mode.empty() || mode == "enforce";
    int code = run_python(argc, argv, &input, 127);
    if (code != 127) return code;
    std::fprintf(stderr, "tripwire-hook: %s, and tripwire cannot be run to answer for it; %s\n",
                 reason.c_str(), enforce ? "the call is blocked (exit 2): under enforce a "
                                           "call tripwire cannot decide does not run"
                                         : "no decision");
    return enforce ? 2 : 0;
}

std::string request_frame(int argc, char** argv, const std::string& input) {
    char cwd[PATH_MAX];
    std::string request(kMagic, 4);
    std::vector<std::string> fields;
    for (int i = 1; i < argc; ++i) fields.emplace_back(argv[i]);
    put_u32(request, static_cast<uint32_t>(fields.size() + 6));
    put_str(request, std::to_string(fields.size()));
    for (const std::string& f : fields) put_str(request, f);
    put_str(request, getcwd(cwd, sizeof cwd) ? std::string(cwd) : std::string());
    put_str(request, env("TRIPWIRE_STORE"));
    put_str(request, env("XDG_STATE_HOME"));
    put_str(request, env("HOME"));
    put_str(request, input);
    return request;
}

int thin_client(int argc, char** argv, const std::string& authority) {
    g_timeout_ms = kAuthorityMs;
    std::string input;
    if (!read_stdin(input)) return authority_down(argc, argv, input, "stdin cannot be read");
    int fd = connect_to(authority);
    if (fd < 0) {
        return authority_down(argc, argv, input, "the authority at " + authority +
                              " cannot be reached (" + std::strerror(errno) + ")");
    }
    int code = 0;
    std::string out, err;
    bool answered = ask(fd, request_frame(argc, argv, input), code, out, err);
    close(fd);
    if (!answered) {
        return authority_down(argc, argv, input, "the authority at " + authority +
                              " gave no hook answer (none in time, or garbled)");
    }
    write_all(STDOUT_FILENO, out.data(), out.size());
    write_all(STDERR_FILENO, err.data(), err.size());
    return code;
}

}  // namespace

int main(int argc, char** argv) {
    std::string authority = trim(option(argc, argv, "--authority"));
    if (authority.empty()) authority = trim(env("TRIPWIRE_AUTHORITY"));
    if (!authority.empty()) return thin_client(argc, argv, authority);
    std::string socket_path = trim(env("TRIPWIRE_HOOK_SOCKET"));
    int fd = socket_path.empty() ? auto_connect(auto_socket()) : connect_to(socket_path);
    if (fd < 0) return run_python(argc, argv, nullptr);
    std::string input;
    if (!read_stdin(input)) {
        close(fd);
        return run_python(argc, argv, &input);
    }
    int code = 0;
    std::string out, err;
    bool answered = ask(fd, request_frame(argc, argv, input), code, out, err);
    close(fd);
    if (!answered) return run_python(argc, argv, &input);
    write_all(STDOUT_FILENO, out.data(), out.size());
    write_all(STDERR_FILENO, err.data(), err.size());
    return code;
}
