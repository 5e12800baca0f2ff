// Package worker runs a program's GPU work in supervised worker processes, so that
// the program survives a kernel that faults.
//
// A sticky fault (an illegal address, a trap, a device-side assert) ends the CUDA
// context it happens in and, on the drivers measured, the process's use of the
// device: no call brings it back (cuda.FaultError). A service that
// must outlive a bad request therefore keeps its GPU work out of its own process.
// Here the program's own binary, started again as Options.Workers processes, serves
// the requests the parent sends it over Unix sockets:
//
//	func init() {
//		worker.Handle("infer", infer) // in every process: parent and workers
//	}
//
//	func main() {
//		worker.Main() // in a worker: serve, then exit; in the parent: return
//		p, err := worker.Start(ctx, worker.Options{Workers: 4, Spares: 1})
//		...
//		out, err := p.Call(ctx, "infer", req, worker.Retry())
//	}
//
// A worker runs each request on a goroutine of its own. When a handler's error is
// a *cuda.FaultError (or carries the driver's sticky error, cuda.Sticky), the worker answers that request with it and every other
// request in flight on it with the same fault, takes no more requests and exits;
// the parent rebuilds the fault (errors.As finds a *cuda.FaultError, errors.Is
// matches cuda.ErrFaulted and the driver's Result) and starts a replacement, or
// promotes a warm spare at once. A worker that dies without answering (killed,
// crashed) fails the requests in flight on it with a *LostError. Requests marked
// Retry go to another worker after a fault or a loss. Restarts are rate-limited
// (Options.MaxRestarts per RestartWindow): beyond the limit the pool logs it and
// Call fails with ErrRestartLimit while no worker is left, until the window
// passes. Stats counts requests served, faults, losses, retries and restarts, with
// each restart's cost (process start and Setup: context, module loads), and the
// device memory each worker still held when Close stopped it.
//
// No worker outlives its parent: Close stops them (and kills them after
// Options.Grace), on Linux the kernel kills them when the parent dies
// (Pdeathsig), and a worker exits when its socket ends.
//
// Tests: a test binary is a program like any other, so TestMain calls Main first:
//
//	func TestMain(m *testing.M) {
//		worker.Main()
//		os.Exit(cudatest.Main(m))
//	}
//
// The workers inherit the environment cudatest.Main sets, so they run on the same
// fake driver (or GPU) as the tests; the fake's fault_* kernels leave a worker's
// context faulted as a real fault does. docs/workers.md has the design: why
// processes, the protocol, what a restart costs, and what is retried.
package worker
