#include "control/peer_liveness.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "util/hash.hpp"

namespace ddp {

namespace {

std::string host_name() {
    char name[256] = {};
    if (::gethostname(name, sizeof name - 1) != 0) return "?";
    return name;
}

std::string first_line(const char* path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

/// A process's state letter and start time from /proc/PID/stat; nothing
/// when there is no such process.
struct ProcStat {
    char state;
    uint64_t start_ticks;
};

std::optional<ProcStat> read_stat(uint64_t pid) {
    const std::string text = first_line(("/proc/" + std::to_string(pid) + "/stat").c_str());
    // "PID (COMMAND) STATE PPID ...": the command may hold spaces and ')'.
    const size_t close = text.rfind(')');
    if (close == std::string::npos) return std::nullopt;
    std::istringstream fields(text.substr(close + 2));
    ProcStat stat{};
    fields >> stat.state;
    std::string skipped;
    for (int field = 4; field < 22; ++field) fields >> skipped;  // fields 4..21
    fields >> stat.start_ticks;                                  // field 22: starttime
    if (!fields) return std::nullopt;
    return stat;
}

}  // namespace

ProcessIdentity this_process() {
    ProcessIdentity me;
    me.pid = static_cast<uint64_t>(::getpid());
    if (auto stat = read_stat(me.pid)) me.start_ticks = stat->start_ticks;
    // The host as /proc sees it: its name, this boot, and the pid namespace
    // (processes in another one have other pids).
    struct stat pid_namespace {};
    ::stat("/proc/self/ns/pid", &pid_namespace);
    const std::string key = host_name() + "/" + first_line("/proc/sys/kernel/random/boot_id") + "/" +
                            std::to_string(pid_namespace.st_ino);
    me.host_key = hash_bytes(key.data(), key.size());
    return me;
}

PeerLiveness::PeerLiveness(std::vector<ProcessIdentity> peers, int rank, double stopped_bound_s)
    : stopped_bound_s_(stopped_bound_s), host_(host_name()) {
    if (peers.empty()) return;
    const uint64_t my_host = peers.at(static_cast<size_t>(rank)).host_key;  // this process's own entry
    for (size_t r = 0; r < peers.size(); ++r)
        if (static_cast<int>(r) != rank && peers[r].host_key == my_host && peers[r].pid != 0)
            here_.push_back(Peer{static_cast<int>(r), peers[r], std::nullopt});
}

std::optional<std::string> PeerLiveness::dead_peer(std::chrono::steady_clock::time_point now) {
    for (Peer& peer : here_) {
        auto who = [&] {
            return "rank " + std::to_string(peer.rank) + " (pid " + std::to_string(peer.identity.pid) + " on host " +
                   host_ + ")";
        };
        const std::optional<ProcStat> stat = read_stat(peer.identity.pid);
        if (!stat || stat->start_ticks != peer.identity.start_ticks) return who() + " exited";
        if (stat->state == 'Z' || stat->state == 'X') return who() + " exited (its process is a zombie)";
        if (stat->state != 'T' && stat->state != 't') {
            peer.stopped_since.reset();
            continue;
        }
        if (!peer.stopped_since) peer.stopped_since = now;
        const double stopped = std::chrono::duration<double>(now - *peer.stopped_since).count();
        if (stopped >= stopped_bound_s_)
            return who() + " has been stopped (SIGSTOP or a debugger) for over " +
                   std::to_string(static_cast<int>(stopped_bound_s_)) + " s";
    }
    return std::nullopt;
}

}  // namespace ddp
