# SPDX-License-Identifier: LGPL-2.1-or-later
"""struct purgatory_params (purgatory/purgatory-abi.h, ABI 4) packed as the loader
writes it, for the tests and benchmarks that run the real purgatory blob under
QEMU (test-loader-qemu.py on x86_64, test-purgatory-arm64-qemu.py on arm64)."""
import hashlib
import struct

PARAMS_OFFSET = 0x40
MAGIC = 0x3147525055504755
ABI_VERSION = 4
MAX_SEGMENTS = 16
MAX_CHUNKS = 512
MAX_CPUS = 64
V4_OFFSET = 128 + 32 * MAX_SEGMENTS + 32 * MAX_CHUNKS
PARAMS_SIZE = V4_OFFSET + 16 + 8 * MAX_CPUS
PSCI_NONE, PSCI_SMC, PSCI_HVC = 0, 1, 2
MODE_FAST, MODE_VERIFIED = 0, 1
FLAG_PANIC, FLAG_MMU_OFF = 1, 2
CONSOLE_PORT, CONSOLE_PL011 = 0, 1
# Offsets in the block, for readers of what purgatory wrote.
OFFSET_SHA256_IMPL_REQUEST = 84
OFFSET_ARCH_STATE = 124
OFFSET_CPUS_HASHED = V4_OFFSET + 8
TEMPLATE = b"0000000000000000,0000000000000000,0000000000000000,-,-"
TEMPLATE_ARM64 = TEMPLATE + b",00000000,00,00"


def pack(entry, entry_arg, mode, flags, stamps_addr, stamps_len, segments, chunk_size,
         request=0, console_port=0, console_kind=CONSOLE_PORT, console_base=0,
         reset_method=0, psci_conduit=PSCI_NONE, mpidrs=()):
    """The parameter block for segments [(addr, data, memsz)]: data is what the
    loader hashed (filesz bytes), memsz >= len(data); mpidrs: the CPUs
    (arm64) purgatory may start by psci_conduit to hash on."""
    seg_table, chunks = b"", []
    for addr, data, memsz in segments:
        first = len(chunks)
        for off in range(0, max(len(data), 1), chunk_size):
            chunks.append(hashlib.sha256(data[off:off + chunk_size]).digest())
        seg_table += struct.pack("<QQQII", addr, len(data), memsz, first, len(chunks) - first)
    p = struct.pack("<QII", MAGIC, ABI_VERSION, PARAMS_SIZE)
    p += struct.pack("<QQ", entry, entry_arg)
    p += struct.pack("<II", mode, flags)
    p += struct.pack("<QIHH", stamps_addr, stamps_len, console_port, len(segments))
    p += bytes(24)  # stamps, written by purgatory
    p += struct.pack("<II", 0, request)  # sha256_impl (written), sha256_impl_request
    p += struct.pack("<QII", chunk_size, len(chunks), 0)  # sha256_lanes: written
    # console_base, console_kind, reset_method, counter_freq and arch_state (written)
    p += struct.pack("<QIIII", console_base, console_kind, reset_method, 0, 0)
    p += seg_table + bytes(32 * MAX_SEGMENTS - len(seg_table))
    p += b"".join(chunks)
    p += bytes(V4_OFFSET - len(p))
    # psci_conduit, nr_cpus, cpus_hashed and cpus_left_on (written), the MPIDRs
    p += struct.pack("<IIII", psci_conduit, len(mpidrs), 0, 0)
    p += b"".join(struct.pack("<Q", m) for m in mpidrs)
    return p + bytes(PARAMS_SIZE - len(p))
