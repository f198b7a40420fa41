#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# A libvirtd that hangs: listens on a unix socket, accepts every connection and never
# answers a byte, until it is killed. usage: fake-libvirtd.py SOCKET
# The daemon pointed at it (--libvirt-uri='qemu+unix:///system?socket=SOCKET') must fail
# each libvirt step with a named error within its deadline and stay responsive.
import socket
import sys

s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(64)
held = []
while True:
    held.append(s.accept()[0])
