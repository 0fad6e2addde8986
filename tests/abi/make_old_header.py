"""Writes a copy of ddp.h as a program built against the first libddp saw it:
ddp_collective_options without the fields added since, timeout_s (1.0),
cuda_stream (1.1), names (1.2) and for_binding (1.3): the first released layout,
{struct_size, fusion_bytes};
ddp_init_options without hang_watchdog_s (1.2). Fails loudly if the header
no longer ends the structs with those fields, so the copy cannot silently
drift.

    make_old_header.py include/ddp/ddp.h OUT.h
"""
import re
import sys

header, out = sys.argv[1], sys.argv[2]
text = open(header).read()
struct = re.search(r"typedef struct ddp_collective_options \{.*?\} ddp_collective_options;", text, re.S)
if struct is None:
    sys.exit(f"{header}: no ddp_collective_options struct")
field = re.search(r"\n    /\*\* Seconds this call may take.*?\*/\n    double timeout_s;\n.*?\*/\n    void\* cuda_stream;\n"
                  r".*?\*/\n    const char\* const\* names;\n.*?\*/\n    int32_t for_binding;\n", struct.group(0), re.S)
if field is None or not struct.group(0).rstrip().endswith("int32_t for_binding;\n} ddp_collective_options;".rstrip()):
    sys.exit(f"{header}: timeout_s, cuda_stream, names and for_binding are no longer ddp_collective_options' last "
             "fields; update this test")
old_struct = struct.group(0).replace(field.group(0), "\n")
text = text.replace(struct.group(0), old_struct)
init = re.search(r"\n    /\*\* Seconds past a collective's deadline.*?\*/\n    double hang_watchdog_s;\n\} ddp_init_options;",
                 text, re.S)
if init is None:
    sys.exit(f"{header}: hang_watchdog_s is no longer ddp_init_options' last field; update this test")
text = text.replace(init.group(0), "\n} ddp_init_options;")
open(out, "w").write(text)
