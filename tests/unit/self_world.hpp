// What the one-process API tests share: libddp's last message, and a world
// on the self backend.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "ddp/ddp.h"

inline std::string message() { return ddp_last_error_message(); }
inline bool mentions(const std::string& text) { return message().find(text) != std::string::npos; }

/// A world on the self backend (timeout 0: the default); nullptr, with the
/// test failed, when ddp_init fails.
inline ddp_comm* start_self(double timeout_s = 0) {
    ddp_init_options opts;
    EXPECT_EQ(ddp_init_options_init(&opts, sizeof opts), DDP_OK);
    opts.backend = DDP_BACKEND_SELF;
    opts.timeout_s = timeout_s;
    ddp_comm* world = nullptr;
    EXPECT_EQ(ddp_init(&opts, &world), DDP_OK) << message();
    return world;
}
