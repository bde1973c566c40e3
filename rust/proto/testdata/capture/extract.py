#!/usr/bin/python3
# Picks test vectors out of the frames.txt files guest.sh writes and
# stores each as testdata/NAME.hex (see ../README):
#   extract.py TESTDATA_DIR FRAMES_TXT...
# For each vector below, the first frame (in the order of the files
# given) with that IP version, BTH opcode and pad count is taken.
import sys

# name, IP version, opcode, pad count, perftest command that sends it
VECTORS = [
    ('rc_send_only', 4, 0x04, 0, 'ib_send_bw -c RC -s 64 -n 5'),
    ('rc_acknowledge', 4, 0x11, 0, 'ib_send_bw -c RC -s 64 -n 5'),
    ('ud_send_only', 4, 0x64, 0, 'ib_send_bw -c UD -s 64 -n 5'),
    ('uc_send_only', 4, 0x24, 0, 'ib_send_bw -c UC -s 64 -n 5'),
    ('rc_rdma_write_only', 4, 0x0a, 0, 'ib_write_bw -c RC -s 64 -n 5'),
    ('rc_rdma_read_request', 4, 0x0c, 0, 'ib_read_bw -c RC -s 64 -n 5'),
    ('rc_rdma_read_response_only', 4, 0x10, 0, 'ib_read_bw -c RC -s 64 -n 5'),
    ('rc_send_first', 4, 0x00, 0, 'ib_send_bw -c RC -s 2500 -m 1024 -n 5'),
    ('rc_send_middle', 4, 0x01, 0, 'ib_send_bw -c RC -s 2500 -m 1024 -n 5'),
    ('rc_send_last', 4, 0x02, 0, 'ib_send_bw -c RC -s 2500 -m 1024 -n 5'),
    ('rc_rdma_read_response_first', 4, 0x0d, 0, 'ib_read_bw -c RC -s 2500 -m 1024 -n 5'),
    ('rc_rdma_read_response_middle', 4, 0x0e, 0, 'ib_read_bw -c RC -s 2500 -m 1024 -n 5'),
    ('rc_rdma_read_response_last', 4, 0x0f, 0, 'ib_read_bw -c RC -s 2500 -m 1024 -n 5'),
    ('rc_fetch_add', 4, 0x14, 0, 'ib_atomic_bw -A FETCH_AND_ADD -n 5'),
    ('rc_compare_swap', 4, 0x13, 0, 'ib_atomic_bw -A CMP_AND_SWAP -n 5'),
    ('rc_atomic_acknowledge', 4, 0x12, 0, 'ib_atomic_bw -A FETCH_AND_ADD -n 5'),
    ('rc_send_only_v6', 6, 0x04, 0, 'ib_send_bw -c RC -s 64 -n 5 over the fe80:: RoCE v2 GID'),
    ('rc_acknowledge_v6', 6, 0x11, 0, 'ib_send_bw -c RC -s 64 -n 5 over the fe80:: RoCE v2 GID'),
    ('ud_send_only_v6', 6, 0x64, 0, 'ib_send_bw -c UD -s 64 -n 5 over the fe80:: RoCE v2 GID'),
    ('ud_send_only_pad3', 4, 0x64, 3, 'ib_send_bw -c UD -s 61 -n 5'),
    ('rc_rdma_write_only_pad1', 4, 0x0a, 1, 'ib_write_bw -c RC -s 63 -n 5'),
    ('rc_rdma_read_response_last_pad3', 4, 0x0f, 3, 'ib_read_bw -c RC -s 1029 -m 1024 -n 5'),
    ('uc_rdma_write_first', 4, 0x26, 0, 'ib_write_bw -c UC -s 2050 -m 1024 -n 5'),
    ('uc_rdma_write_middle', 4, 0x27, 0, 'ib_write_bw -c UC -s 2050 -m 1024 -n 5'),
    ('uc_rdma_write_last_pad2', 4, 0x28, 2, 'ib_write_bw -c UC -s 2050 -m 1024 -n 5'),
    ('rc_send_only_pad2_v6', 6, 0x04, 2, 'ib_send_bw -c RC -s 62 -n 5 over the fe80:: RoCE v2 GID'),
]

out_dir, files = sys.argv[1], sys.argv[2:]
frames = [line.split() for f in files for line in open(f)]
for name, ver, op, pad, cmd in VECTORS:
    for direction, h in frames:
        b = bytes.fromhex(h)
        if b[0] >> 4 != ver:
            continue
        bth = 20 + 8 if ver == 4 else 40 + 8
        if b[bth] == op and (b[bth + 1] >> 4) & 3 == pad:
            break
    else:
        sys.exit(f'no frame for {name}')
    sender = 'VM 0 (perftest client)' if direction == 'in' else 'VM 1 (perftest server)'
    with open(f'{out_dir}/{name}.hex', 'w') as f:
        f.write(f'# {name}: a RoCEv2 packet rxe (Linux 6.12) sent, IPv{ver} header to ICRC,\n')
        f.write(f'# {len(b)} bytes, from {sender}.\n')
        f.write(f'# The first packet with this opcode during `{cmd}` (see README).\n')
        for i in range(0, len(b), 16):
            f.write(' '.join(f'{x:02x}' for x in b[i:i + 16]) + '\n')
