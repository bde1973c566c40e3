#!/usr/bin/python3
# Captures RoCEv2 frames (UDP dst port 4791) on one interface with an
# AF_PACKET socket and writes one line per frame:
#   <direction in|out> <hex of the frame from the IP header on>
# until the file named by argv[3] exists.
import os, select, socket, sys
ifname, outpath, stopfile = sys.argv[1:4]
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.bind((ifname, 0))
with open(outpath, "w") as f:
    while not os.path.exists(stopfile):
        r, _, _ = select.select([s], [], [], 0.5)
        if not r:
            continue
        frame, addr = s.recvfrom(65535)
        pkttype = addr[2]
        et = int.from_bytes(frame[12:14], "big")
        ip = frame[14:]
        if et == 0x0800 and len(ip) >= 28 and ip[9] == 17:
            ihl = (ip[0] & 15) * 4
            tot = int.from_bytes(ip[2:4], "big")
            ip = ip[:tot]
            udp = ip[ihl:]
        elif et == 0x86DD and len(ip) >= 48 and ip[6] == 17:
            ip = ip[:40 + int.from_bytes(ip[4:6], "big")]
            udp = ip[40:]
        else:
            continue
        if int.from_bytes(udp[2:4], "big") != 4791:
            continue
        f.write(("out" if pkttype == 4 else "in") + " " + ip.hex() + "\n")
        f.flush()
