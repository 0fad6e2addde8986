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
this thread. Nothing may call libddp between the failing call and reading its
thread-local message: no task switch can happen (neither yields), and finalizers (a
`Request`'s calls `ddp_request_test`) are held back while the message is copied.
"""
function check(status::LibDDP.ddp_status)
    status == LibDDP.DDP_OK && return nothing
    message = without_finalizers(() -> unsafe_string(LibDDP.ddp_last_error_message()))
    throw(DDPError(status, unsafe_string(LibDDP.ddp_status_name(status)), message))
end

"""Calls `f()` with this thread's finalizers held back (Julia < 1.6 has no such switch)."""
function without_finalizers(f)
    isdefined(GC, :enable_finalizers) || return f()
    GC.enable_finalizers(false)
    try
        return f()
    finally
        GC.enable_finalizers(true)
    end
end
