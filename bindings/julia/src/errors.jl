"""
    DDPError(status, name, message)

A libddp call failed. `status` is the `LibDDP.ddp_status` (`LibDDP.DDP_ERR_MISMATCH`,
...), `name` its C name, `message` libddp's sentence naming the argument, the rank
and the tensor involved.
"""
struct DDPError <: Exception
    status::LibDDP.ddp_status
    name::String
    message::String
end

Base.showerror(io::IO, e::DDPError) = print(io, "DDPError(", e.name, "): ", e.message)

"""A DDPError for `status` that this package detects itself (no libddp message)."""
DDPError(status::LibDDP.ddp_status, message::AbstractString) =
    DDPError(status, unsafe_string(LibDDP.ddp_status_name(status)), message)

"""
    check(status)

Returns `nothing` for `DDP_OK`, else throws the `DDPError` with libddp's message for
this thread. No task switch can happen between the failing call and reading the
thread-local message, since neither yields.
"""
function check(status::LibDDP.ddp_status)
    status == LibDDP.DDP_OK && return nothing
    throw(DDPError(status, unsafe_string(LibDDP.ddp_status_name(status)),
                   unsafe_string(LibDDP.ddp_last_error_message())))
end
