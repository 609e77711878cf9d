package pgtest

import "syscall"

var errAddrInUse error = syscall.EADDRINUSE
