#include "planes/exchange.hpp"

#include <string>

#include "util/error.hpp"

namespace ddp {

std::vector<Meeting> meetings_of(std::span<const Exchange* const> exchanges, int first_rank, size_t receiver) {
    const int receiver_rank = first_rank + static_cast<int>(receiver);
    std::vector<size_t> received(exchanges.size(), 0);  // by sender: its sends to the receiver met so far
    std::vector<Meeting> meetings;
    for (const Receive& receive : exchanges[receiver]->receives) {
        const int sender = receive.peer - first_rank;
        if (sender < 0 || static_cast<size_t>(sender) >= exchanges.size()) continue;
        size_t seen = 0;
        const Send* meeting = nullptr;
        for (const Send& send : exchanges[static_cast<size_t>(sender)]->sends)
            if (send.peer == receiver_rank && seen++ == received[static_cast<size_t>(sender)]) {
                meeting = &send;
                break;
            }
        if (meeting == nullptr || meeting->bytes != receive.bytes)
            fail(DDP_ERR_INTERNAL, "rank " + std::to_string(receiver_rank) + " receives " +
                                       std::to_string(receive.bytes) + " bytes from rank " +
                                       std::to_string(receive.peer) + ", which sends " +
                                       (meeting == nullptr ? std::string("nothing more")
                                                           : std::to_string(meeting->bytes) + " bytes") +
                                       " to it: a libddp bug; please report it");
        ++received[static_cast<size_t>(sender)];
        meetings.push_back({&receive, meeting});
    }
    // And no send that no receive meets: its bytes would go nowhere.
    for (size_t sender = 0; sender < exchanges.size(); ++sender) {
        size_t sends = 0;
        for (const Send& send : exchanges[sender]->sends) sends += send.peer == receiver_rank ? 1 : 0;
        if (sends > received[sender])
            fail(DDP_ERR_INTERNAL, "rank " + std::to_string(first_rank + static_cast<int>(sender)) + " sends " +
                                       std::to_string(sends) + " messages to rank " + std::to_string(receiver_rank) +
                                       ", which receives " + std::to_string(received[sender]) +
                                       ": a libddp bug; please report it");
    }
    return meetings;
}

}  // namespace ddp
