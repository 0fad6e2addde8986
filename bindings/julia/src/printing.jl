# FluxMPI's fluxmpi_println / fluxmpi_print: a line prefixed with the rank.

"""
    ddp_println(args...)

Prints `args` as one line prefixed `[ddp RANK/SIZE HH:MM:SS.mmm]` on this rank
(`fluxmpi_println`), through libddp's log at info level: to stderr, or to the callback
set with `ddp_set_log_callback`, unless `DDP_LOG_LEVEL` is above info.
"""
function ddp_println(args...)
    check(LibDDP.ddp_log(world().handle, LibDDP.DDP_LOG_INFO, string(args...)))
    return nothing
end

"""
    ddp_print(args...)

`fluxmpi_print`'s name: as `ddp_println`, since libddp's log writes whole lines.
"""
ddp_print(args...) = ddp_println(args...)
