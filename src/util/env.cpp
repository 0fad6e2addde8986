#include "util/env.hpp"

#include <cctype>
#include <cstdlib>

#include "util/error.hpp"

namespace ddp {

std::optional<std::string> env_string(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') return std::nullopt;
    return std::string(value);
}

std::optional<int64_t> env_bytes(const char* name) {
    auto text = env_string(name);
    if (!text) return std::nullopt;
    char* end = nullptr;
    long long number = std::strtoll(text->c_str(), &end, 10);
    int64_t multiplier = 1;
    switch (std::toupper(static_cast<unsigned char>(*end))) {
    case 'K': multiplier = int64_t{1} << 10; ++end; break;
    case 'M': multiplier = int64_t{1} << 20; ++end; break;
    case 'G': multiplier = int64_t{1} << 30; ++end; break;
    default: break;
    }
    if (end == text->c_str() || *end != '\0' || number < 0 || number > (int64_t{1} << 40) / multiplier)
        fail(DDP_ERR_INVALID_ARGUMENT, std::string(name) + "='" + *text +
                                           "' is not a byte count (like 1048576, 512K or 4M)");
    return number * multiplier;
}

std::optional<int64_t> env_count(const char* name, int64_t max) {
    auto text = env_string(name);
    if (!text) return std::nullopt;
    char* end = nullptr;
    const long long number = std::strtoll(text->c_str(), &end, 10);
    if (end == text->c_str() || *end != '\0' || number < 0 || number > max)
        fail(DDP_ERR_INVALID_ARGUMENT, std::string(name) + "='" + *text + "' is not a whole number from 0 to " +
                                           std::to_string(max));
    return number;
}

std::optional<double> env_seconds(const char* name) {
    auto text = env_string(name);
    if (!text) return std::nullopt;
    char* end = nullptr;
    double seconds = std::strtod(text->c_str(), &end);
    if (end == text->c_str() || *end != '\0' || !(seconds > 0))
        fail(DDP_ERR_INVALID_ARGUMENT,
             std::string(name) + "='" + *text + "' is not a positive number of seconds");
    return seconds;
}

std::optional<bool> env_switch(const char* name) {
    auto text = env_string(name);
    if (!text) return std::nullopt;
    std::string lower;
    for (char c : *text) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower == "1" || lower == "on" || lower == "true" || lower == "yes") return true;
    if (lower == "0" || lower == "off" || lower == "false" || lower == "no") return false;
    fail(DDP_ERR_INVALID_ARGUMENT, std::string(name) + "='" + *text + "' is not 1 or 0 (on or off)");
}

}  // namespace ddp
