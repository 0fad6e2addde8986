"""Cuts a shared library's CUDA device code down to one GPU architecture, so
that NCCL from the nvidia-nccl-cu13 wheel (344 MB, device code for every GPU
from Turing to Blackwell) fits the GPU check's bundle (scripts/gpu-bundle).

    python3 scripts/prune-fatbin.py IN OUT SM        (SM: 90 for Hopper)

Every fatbin container in the sections .nv_fatbin and __nv_relfatbin keeps
only its entries (machine code or PTX) for SM, moved to the container's
start; the container's size field says so, and the bytes freed are zeroed,
so the library keeps its layout (nothing else moves) and compresses to
about what it keeps. A container with no entry for SM (code for one other
GPU alone) is left whole. The host code is untouched. Prints what it kept."""
import struct
import subprocess
import sys

CONTAINER_MAGIC = 0xBA55ED50
SECTIONS = (".nv_fatbin", "__nv_relfatbin")


def sections(path):
    """(name, file offset, size) of the fatbin sections, as readelf lists them."""
    listing = subprocess.run(["readelf", "-S", "-W", path], check=True, capture_output=True, text=True).stdout
    found = []
    for line in listing.splitlines():
        if "]" not in line:
            continue
        fields = line.split("]", 1)[1].split()
        if fields and fields[0] in SECTIONS:
            found.append((fields[0], int(fields[3], 16), int(fields[4], 16)))
    return found


def entries(data, start, end):
    """(offset, length, arch) of each entry between start and end."""
    at = start
    while at < end:
        _kind, _version, header_size, payload_size = struct.unpack_from("<HHIQ", data, at)
        arch = struct.unpack_from("<I", data, at + 28)[0]
        yield at, header_size + payload_size, arch
        at += header_size + payload_size


def prune_section(data, offset, size, sm):
    """Prunes the containers of one section in place; returns (bytes before, kept)."""
    at, end, kept = offset, offset + size, 0
    while at < end:
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", data, at)
        if magic != CONTAINER_MAGIC:
            raise SystemExit(f"no fatbin container at offset {at:#x}: not a layout this script knows")
        body, body_end = at + header_size, at + header_size + fat_size
        listed = list(entries(data, body, body_end))
        chosen = [(o, n) for o, n, arch in listed if arch == sm]
        if not chosen:
            kept += fat_size
        else:
            pieces = b"".join(bytes(data[o:o + n]) for o, n in chosen)
            data[body:body + len(pieces)] = pieces
            data[body + len(pieces):body_end] = bytes(body_end - body - len(pieces))
            struct.pack_into("<Q", data, at + 8, len(pieces))
            kept += len(pieces)
        at = body_end
    return size, kept


def main():
    source, target, sm = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(source, "rb") as file:
        data = bytearray(file.read())
    found = sections(source)
    if not found:
        raise SystemExit(f"{source} has no CUDA fatbin section")
    for name, offset, size in found:
        before, kept = prune_section(data, offset, size, sm)
        print(f"{name}: kept {kept / 1e6:.1f} of {before / 1e6:.1f} MB (sm_{sm})")
    with open(target, "wb") as file:
        file.write(data)


if __name__ == "__main__":
    main()
