package worker

import "syscall"

// procAttr makes the kernel kill a worker when the parent's thread that started it
// exits (the spawner's, which lives as long as the pool), so that no worker outlives
// a parent that crashed or was killed.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
