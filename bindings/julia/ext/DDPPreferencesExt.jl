"""
`DDP.set_libddp_path!` through Preferences.jl: writes the `libddp_path` preference
that the core package reads through Base (so reading needs no Preferences.jl).
"""
module DDPPreferencesExt

using Preferences: Preferences
using DDP: DDP

function __init__()
    DDP.PREFERENCE_WRITER[] = path -> Preferences.set_preferences!(
        DDP, "libddp_path" => path; force = true)
end

end # module
