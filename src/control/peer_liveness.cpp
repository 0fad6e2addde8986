#include "control/peer_liveness.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "control/channel.hpp"
#include "util/hash.hpp"
#include "util/log.hpp"

namespace ddp {

namespace {

// A wait this old starts the heartbeat; it is sent this often, or four
// times within the bound where that is shorter.
constexpr auto heartbeat_interval = std::chrono::seconds(1);
constexpr size_t host_words = ProcessIdentity::words - 3;

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

std::vector<uint64_t> ProcessIdentity::to_words() const {
    std::vector<uint64_t> out(words);
    out[0] = pid;
    out[1] = start_ticks;
    out[2] = host_key;
    std::memcpy(&out[3], host.data(), std::min(host.size(), host_words * sizeof(uint64_t)));
    return out;
}

ProcessIdentity ProcessIdentity::from_words(std::span<const uint64_t> in) {
    ProcessIdentity identity{in[0], in[1], in[2], {}};
    char name[host_words * sizeof(uint64_t) + 1] = {};
    std::memcpy(name, &in[3], host_words * sizeof(uint64_t));
    identity.host = name;
    return identity;
}

ProcessIdentity this_process() {
    ProcessIdentity me;
    me.pid = static_cast<uint64_t>(::getpid());
    if (auto stat = read_stat(me.pid)) me.start_ticks = stat->start_ticks;
    me.host = host_name();
    // The host as /proc sees it: its name, this boot, and the pid namespace
    // (processes in another one have other pids).
    struct stat pid_namespace {};
    ::stat("/proc/self/ns/pid", &pid_namespace);
    const std::string key = me.host + "/" + first_line("/proc/sys/kernel/random/boot_id") + "/" +
                            std::to_string(pid_namespace.st_ino);
    me.host_key = hash_bytes(key.data(), key.size());
    return me;
}

PeerLiveness::PeerLiveness(ControlChannel& channel, double bound_s)
    : channel_(channel),
      processes_(channel.processes()),
      bound_s_(bound_s),
      ping_interval_(std::min<Clock::duration>(
          heartbeat_interval,
          std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(bound_s / 4)))) {
    if (processes_.empty()) return;
    const int rank = channel.rank();
    const uint64_t my_host = processes_.at(static_cast<size_t>(rank)).host_key;
    for (size_t r = 0; r < processes_.size(); ++r) {
        if (static_cast<int>(r) == rank || processes_[r].pid == 0) continue;
        if (processes_[r].host_key == my_host)
            here_.push_back(Peer{static_cast<int>(r), std::nullopt});
        else
            away_.push_back(static_cast<int>(r));
    }
}

std::string PeerLiveness::who(int rank) const {
    const std::string name = "rank " + std::to_string(rank);
    if (rank < 0 || static_cast<size_t>(rank) >= processes_.size()) return name;
    const ProcessIdentity& process = processes_[static_cast<size_t>(rank)];
    return name + " (pid " + std::to_string(process.pid) + " on host " + process.host + ")";
}

std::optional<DeadPeer> PeerLiveness::dead_peer(Clock::time_point now, Clock::time_point wait_started) {
    for (Peer& peer : here_)
        if (auto dead = dead_here(peer, now)) return dead;
    // Heartbeats need the peers' control threads: without them a peer
    // computing outside libddp could not answer.
    if (away_.empty() || !channel_.answers_in_background()) return std::nullopt;
    if (wait_started != wait_started_) {  // a new wait
        wait_started_ = wait_started;
        pinging_since_.reset();
    }
    if (now - wait_started < heartbeat_interval) return std::nullopt;
    if (!pinging_since_) {
        pinging_since_ = now;
        next_ping_ = now;
    }
    if (now >= next_ping_) {
        channel_.ping(away_);
        next_ping_ = now + ping_interval_;
    }
    for (int rank : away_)
        if (auto dead = silent_away(rank, now)) return dead;
    return std::nullopt;
}

std::optional<DeadPeer> PeerLiveness::dead_here(Peer& peer, Clock::time_point now) {
    const ProcessIdentity& identity = processes_[static_cast<size_t>(peer.rank)];
    const std::optional<ProcStat> stat = read_stat(identity.pid);
    if (!stat || stat->start_ticks != identity.start_ticks) return DeadPeer{peer.rank, who(peer.rank) + " exited"};
    if (stat->state == 'Z' || stat->state == 'X')
        return DeadPeer{peer.rank, who(peer.rank) + " exited (its process is a zombie)"};
    if (stat->state != 'T' && stat->state != 't') {
        peer.stopped_since.reset();
        return std::nullopt;
    }
    if (!peer.stopped_since) peer.stopped_since = now;
    if (std::chrono::duration<double>(now - *peer.stopped_since).count() < bound_s_) return std::nullopt;
    return DeadPeer{peer.rank,
                    who(peer.rank) + " has been stopped (SIGSTOP or a debugger) for over " + seconds_text(bound_s_)};
}

std::optional<DeadPeer> PeerLiveness::silent_away(int rank, Clock::time_point now) {
    const auto bound = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(bound_s_));
    if (now - *pinging_since_ < bound) return std::nullopt;
    const std::optional<Clock::time_point> heard = channel_.last_heard_from(rank);
    if (heard && now - *heard < bound) return std::nullopt;
    return DeadPeer{rank, who(rank) + " has not answered a heartbeat for over " + seconds_text(bound_s_) +
                              " (it died, was stopped, or the network cut it off)"};
}

}  // namespace ddp
