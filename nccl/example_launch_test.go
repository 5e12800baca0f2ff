package nccl_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/gocuda/gocuda/nccl"
)

// A process that torchrun, srun, mpirun or a Kubernetes indexed Job started finds
// its place in the job in the environment.
func ExampleLaunchFromEnv() {
	// As torchrun --nnodes=2 --nproc-per-node=4 sets them for one of its processes.
	for k, v := range map[string]string{"RANK": "6", "WORLD_SIZE": "8", "LOCAL_RANK": "2",
		"MASTER_ADDR": "10.1.2.3", "MASTER_PORT": "29400"} {
		os.Setenv(k, v)
		defer os.Unsetenv(k)
	}
	l, err := nccl.LaunchFromEnv()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: rank %d of %d, local rank %d, rank 0 at %s\n", l.Launcher, l.Rank, l.Size, l.LocalRank, l.Addr)
	// Output: torchrun: rank 6 of 8, local rank 2, rank 0 at 10.1.2.3:29400
}

// Each process of a job joins its communicator in one call. (Compiled, not run: it
// needs a launcher, GPUs and NCCL.)
func ExampleJoinFromEnv() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	comm, l, err := nccl.JoinFromEnv(ctx)
	if err != nil {
		fmt.Println(err) // names the variables it looked for when no launcher set them
		return
	}
	defer comm.Close()
	fmt.Printf("rank %d of %d on device %d\n", comm.Rank(), comm.Size(), l.LocalRank)
}
