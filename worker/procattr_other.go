//go:build !linux

package worker

import "syscall"

// procAttr: without Pdeathsig, a worker whose parent died ends when it reads the
// end of its socket.
func procAttr() *syscall.SysProcAttr { return nil }
