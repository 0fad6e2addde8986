#include "util/collective_kind.hpp"

#include "util/error.hpp"

namespace ddp {

const char* kind_name(uint64_t kind) {
    for (const KindFacts& facts : kind_facts)
        if (static_cast<uint64_t>(facts.kind) == kind) return facts.name;
    return "an unknown collective";
}

CollectiveKind reportable_kind(std::string_view name) {
    std::string names;
    for (const KindFacts& facts : kind_facts) {
        if (!facts.reportable) continue;
        if (name == facts.name) return facts.kind;
        names += std::string(names.empty() ? "" : ", ") + facts.name;
    }
    fail(DDP_ERR_INVALID_ARGUMENT, "collective \"" + std::string(name) + "\" is not one of " + names);
}

std::string call_name(uint64_t kind, CallLabel label) {
    if (!label.for_binding) return std::string(kind_name(kind)) + " #" + std::to_string(label.number);
    return std::string("the binding's own ") + kind_name(kind) +
           (label.number == 0 ? std::string(" before call #1") : " after call #" + std::to_string(label.number));
}

}  // namespace ddp
