package nccl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/gocuda/gocuda/cuda"
)

// Launch is a process's place in a job, as the program that launched it (torchrun,
// Slurm, an MPI launcher, a Kubernetes indexed Job) describes it in the
// environment.
type Launch struct {
	// Launcher names where the values came from: "torchrun", "openmpi", "pmi",
	// "slurm" or "kubernetes".
	Launcher string
	// Rank is the process's rank in the job and Size the number of ranks.
	Rank, Size int
	// LocalRank is the rank among the job's processes on this host, which picks
	// the device (Device).
	LocalRank int
	// Addr is rank 0's rendezvous address, "host:port" (TCPRendezvous.Addr).
	Addr string
}

// ErrNoLauncher is matched (errors.Is) by LaunchFromEnv's error when no launcher's
// variables are set; the error names the variables it looked for.
var ErrNoLauncher = errors.New("nccl: no launcher's variables in the environment")

// DefaultRendezvousPort is the port of rank 0's rendezvous where a launcher names
// a host but no port (Slurm, MPI launchers, Kubernetes) and MASTER_PORT is unset:
// torchrun's default.
const DefaultRendezvousPort = 29500

// The launchers LaunchFromEnv knows, most specific first: an MPI launcher run
// inside a Slurm allocation sets Slurm's variables too, and torchrun's are set only
// by torchrun (or by hand, as Kubernetes users do).
var launchers = []struct {
	name              string
	rank, size, local string // local "": 0 unless LOCAL_RANK is set
	// hostOf names rank 0's host for a launcher that has its own way (Slurm's node
	// list); the others take MASTER_ADDR.
	hostOf func(env func(string) (string, bool)) (string, error)
}{
	{name: "torchrun", rank: "RANK", size: "WORLD_SIZE", local: "LOCAL_RANK"},
	{name: "openmpi", rank: "OMPI_COMM_WORLD_RANK", size: "OMPI_COMM_WORLD_SIZE", local: "OMPI_COMM_WORLD_LOCAL_RANK"},
	{name: "pmi", rank: "PMI_RANK", size: "PMI_SIZE", local: "MPI_LOCALRANKID"},
	{name: "slurm", rank: "SLURM_PROCID", size: "SLURM_NTASKS", local: "SLURM_LOCALID", hostOf: slurmFirstHost},
	{name: "kubernetes", rank: "JOB_COMPLETION_INDEX", size: "WORLD_SIZE"},
}

// LaunchFromEnv reads the process's rank, the number of ranks, its local rank and
// rank 0's rendezvous address from the environment of the first launcher whose
// rank variable is set:
//
//   - torchrun: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT;
//   - Open MPI (mpirun, prterun): OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE,
//     OMPI_COMM_WORLD_LOCAL_RANK;
//   - PMI launchers (MPICH's and Intel MPI's Hydra): PMI_RANK, PMI_SIZE,
//     MPI_LOCALRANKID;
//   - Slurm (srun): SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, and the first host
//     of the step (SLURM_STEP_NODELIST, else SLURM_JOB_NODELIST, in Slurm's
//     hostlist syntax);
//   - a Kubernetes indexed Job: JOB_COMPLETION_INDEX, and WORLD_SIZE (the Job's
//     completions, which the pod spec passes on); the local rank is 0 (a pod per
//     rank) unless LOCAL_RANK says otherwise.
//
// Rank 0's address is GOCUDA_RENDEZVOUS ("host:port") where it is set; else its
// host is MASTER_ADDR (which torchrun sets, and users of the other launchers may),
// or for Slurm the step's first host, and its port MASTER_PORT, else
// DefaultRendezvousPort. It fails with an error matching ErrNoLauncher, naming
// every variable it looked for, when no launcher's rank is set, and with one naming
// the variable when a value is missing or malformed.
func LaunchFromEnv() (Launch, error) { return launchFrom(os.LookupEnv) }

func launchFrom(env func(string) (string, bool)) (Launch, error) {
	var looked []string
	for _, l := range launchers {
		looked = append(looked, l.rank)
		if _, ok := env(l.rank); !ok {
			continue
		}
		out := Launch{Launcher: l.name}
		var err error
		if out.Rank, err = intVar(env, l.rank); err != nil {
			return Launch{}, err
		}
		if out.Size, err = intVar(env, l.size); err != nil {
			return Launch{}, fmt.Errorf("%w (%s sets %s)", err, l.name, l.rank)
		}
		local := l.local
		if _, ok := env("LOCAL_RANK"); local == "" && ok {
			local = "LOCAL_RANK"
		}
		if local != "" {
			if out.LocalRank, err = intVar(env, local); err != nil {
				return Launch{}, err
			}
		}
		if out.Size < 1 || out.Rank < 0 || out.Rank >= out.Size || out.LocalRank < 0 {
			return Launch{}, fmt.Errorf("%w: %s: rank %d of %d (local rank %d)", cuda.ErrInvalidArgument, l.name, out.Rank, out.Size, out.LocalRank)
		}
		if out.Addr, err = rendezvousAddr(env, l.hostOf); err != nil {
			return Launch{}, fmt.Errorf("nccl: %s: %w", l.name, err)
		}
		return out, nil
	}
	return Launch{}, fmt.Errorf("%w: looked for %s", ErrNoLauncher, strings.Join(looked, ", "))
}

// intVar reads the integer in variable name.
func intVar(env func(string) (string, bool), name string) (int, error) {
	v, ok := env(name)
	if !ok {
		return 0, fmt.Errorf("%w: %s is not set", cuda.ErrInvalidArgument, name)
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%w: %s=%q is not an integer", cuda.ErrInvalidArgument, name, v)
	}
	return n, nil
}

// rendezvousAddr returns rank 0's address: GOCUDA_RENDEZVOUS, else MASTER_ADDR's
// host or hostOf's, with MASTER_PORT's port or DefaultRendezvousPort.
func rendezvousAddr(env func(string) (string, bool), hostOf func(func(string) (string, bool)) (string, error)) (string, error) {
	if a, ok := env("GOCUDA_RENDEZVOUS"); ok {
		if _, _, err := net.SplitHostPort(a); err != nil {
			return "", fmt.Errorf("%w: GOCUDA_RENDEZVOUS=%q: %v", cuda.ErrInvalidArgument, a, err)
		}
		return a, nil
	}
	host, ok := env("MASTER_ADDR")
	switch {
	case ok && host != "":
	case hostOf != nil:
		h, err := hostOf(env)
		if err != nil {
			return "", err
		}
		host = h
	default:
		return "", fmt.Errorf("%w: rank 0's host is not named: set MASTER_ADDR (and MASTER_PORT) or GOCUDA_RENDEZVOUS", cuda.ErrInvalidArgument)
	}
	port := strconv.Itoa(DefaultRendezvousPort)
	if p, ok := env("MASTER_PORT"); ok {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", fmt.Errorf("%w: MASTER_PORT=%q is not a port", cuda.ErrInvalidArgument, p)
		}
		port = p
	}
	return net.JoinHostPort(host, port), nil
}

// slurmFirstHost returns the first host of the step's (else the job's) node list.
func slurmFirstHost(env func(string) (string, bool)) (string, error) {
	for _, v := range []string{"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"} {
		if list, ok := env(v); ok && list != "" {
			h, err := firstHost(list)
			if err != nil {
				return "", fmt.Errorf("%w: %s=%q: %v", cuda.ErrInvalidArgument, v, list, err)
			}
			return h, nil
		}
	}
	return "", fmt.Errorf("%w: SLURM_STEP_NODELIST and SLURM_JOB_NODELIST are not set", cuda.ErrInvalidArgument)
}

// firstHost returns the first host of a Slurm hostlist ("gpu[03-05,9],login1" →
// "gpu03"): the first entry, with the first value of its first bracket range,
// zero-padded as written.
func firstHost(list string) (string, error) {
	entry := list
	depth := 0
	for i, r := range list {
		switch r {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				entry = list[:i]
			}
		}
		if entry != list {
			break
		}
	}
	open := strings.IndexByte(entry, '[')
	if open < 0 {
		if entry == "" {
			return "", errors.New("an empty host")
		}
		return entry, nil
	}
	end := strings.IndexByte(entry[open:], ']')
	if end < 0 {
		return "", errors.New("an unclosed '['")
	}
	first := entry[open+1 : open+end]
	first, _, _ = strings.Cut(first, ",")
	first, _, _ = strings.Cut(first, "-")
	if first == "" || strings.Trim(first, "0123456789") != "" {
		return "", fmt.Errorf("range %q", entry[open:open+end+1])
	}
	return entry[:open] + first + entry[open+end+1:], nil
}

// Device returns the device of the process's local rank: the local rank's device
// where this process sees several, or its one device where the launcher gave each
// process one (CUDA_VISIBLE_DEVICES). A local rank past the devices seen is an
// error.
func (l Launch) Device() (cuda.Device, error) {
	n, err := cuda.DeviceCount()
	if err != nil {
		return 0, err
	}
	switch {
	case n == 1:
		return 0, nil
	case l.LocalRank < n:
		return cuda.Device(l.LocalRank), nil
	}
	return 0, fmt.Errorf("%w: local rank %d, but this process sees %d devices", cuda.ErrInvalidArgument, l.LocalRank, n)
}

// JoinFromEnv joins the communicator of the job that launched this process: it
// reads the process's place from the environment (LaunchFromEnv), picks the device
// of its local rank (Launch.Device) and joins through a TCPRendezvous at rank 0's
// address, with the job's secret where the environment holds one
// (JobSecretFromEnv), as Join does. It returns the Launch with the communicator.
// It does not watch the ranks: for an elastic job (the package's doc), Join through a
// TCPRendezvous at the Launch's Addr with a Liveness.
func JoinFromEnv(ctx context.Context) (*Comm, Launch, error) {
	l, err := LaunchFromEnv()
	if err != nil {
		return nil, l, err
	}
	secret, err := JobSecretFromEnv()
	if err != nil {
		return nil, l, err
	}
	dev, err := l.Device()
	if err != nil {
		return nil, l, err
	}
	c, err := Join(ctx, &TCPRendezvous{Addr: l.Addr, Secret: secret}, l.Rank, l.Size, dev)
	return c, l, err
}
