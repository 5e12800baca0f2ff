package nccl_test

import (
	"testing"

	"github.com/gocuda/gocuda/cuda"
	"github.com/gocuda/gocuda/cuda/cudatest"
	"github.com/gocuda/gocuda/nccl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Each launcher's variables, as that launcher sets them.
func TestLaunchFromEnv(t *testing.T) {
	for name, c := range map[string]struct {
		env  map[string]string
		want nccl.Launch
	}{
		"torchrun": {map[string]string{"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29400"},
			nccl.Launch{Launcher: "torchrun", Rank: 3, Size: 8, LocalRank: 1, Addr: "10.0.0.1:29400"}},
		"torchrun, IPv6 host, default port": {map[string]string{"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "fe80::1"},
			nccl.Launch{Launcher: "torchrun", Rank: 0, Size: 1, Addr: "[fe80::1]:29500"}},
		"openmpi inside slurm": {map[string]string{"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "16", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
			"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0", "MASTER_ADDR": "head"},
			nccl.Launch{Launcher: "openmpi", Rank: 5, Size: 16, LocalRank: 1, Addr: "head:29500"}},
		"pmi (hydra)": {map[string]string{"PMI_RANK": "2", "PMI_SIZE": "4", "MPI_LOCALRANKID": "2", "GOCUDA_RENDEZVOUS": "node7:4000"},
			nccl.Launch{Launcher: "pmi", Rank: 2, Size: 4, LocalRank: 2, Addr: "node7:4000"}},
		"slurm: the step's first host": {map[string]string{"SLURM_PROCID": "9", "SLURM_NTASKS": "12", "SLURM_LOCALID": "3",
			"SLURM_STEP_NODELIST": "gpu[007-009,12],login1", "SLURM_JOB_NODELIST": "other", "MASTER_PORT": "31000"},
			nccl.Launch{Launcher: "slurm", Rank: 9, Size: 12, LocalRank: 3, Addr: "gpu007:31000"}},
		"slurm: MASTER_ADDR names the host": {map[string]string{"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0",
			"SLURM_JOB_NODELIST": "a1", "MASTER_ADDR": "b2"},
			nccl.Launch{Launcher: "slurm", Rank: 1, Size: 2, Addr: "b2:29500"}},
		"kubernetes indexed job": {map[string]string{"JOB_COMPLETION_INDEX": "4", "WORLD_SIZE": "6", "MASTER_ADDR": "train-0.train"},
			nccl.Launch{Launcher: "kubernetes", Rank: 4, Size: 6, Addr: "train-0.train:29500"}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := nccl.LaunchFrom(c.env)
			require.NoError(t, err)
			assert.Equal(t, c.want, got)
		})
	}
}

// Missing and malformed values are errors that name the variable; no launcher at
// all names every rank variable looked for.
func TestLaunchFromEnvErrors(t *testing.T) {
	_, err := nccl.LaunchFrom(nil)
	require.ErrorIs(t, err, nccl.ErrNoLauncher)
	for _, v := range []string{"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "JOB_COMPLETION_INDEX"} {
		assert.Contains(t, err.Error(), v)
	}
	for name, c := range map[string]struct {
		env  map[string]string
		want string
	}{
		"no world size":       {map[string]string{"RANK": "0", "MASTER_ADDR": "h"}, "WORLD_SIZE is not set"},
		"rank not a number":   {map[string]string{"RANK": "x", "WORLD_SIZE": "2", "MASTER_ADDR": "h"}, `RANK="x"`},
		"rank past the size":  {map[string]string{"RANK": "2", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "h"}, "rank 2 of 2"},
		"no host":             {map[string]string{"PMI_RANK": "0", "PMI_SIZE": "2", "MPI_LOCALRANKID": "0"}, "MASTER_ADDR"},
		"bad port":            {map[string]string{"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "h", "MASTER_PORT": "99999"}, "MASTER_PORT"},
		"bad override":        {map[string]string{"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "GOCUDA_RENDEZVOUS": "nohost"}, "GOCUDA_RENDEZVOUS"},
		"slurm, no node list": {map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0"}, "SLURM_STEP_NODELIST"},
		"slurm, bad list":     {map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0", "SLURM_JOB_NODELIST": "gpu[1-"}, "SLURM_JOB_NODELIST"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := nccl.LaunchFrom(c.env)
			require.ErrorIs(t, err, cuda.ErrInvalidArgument)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestSlurmFirstHost(t *testing.T) {
	for list, want := range map[string]string{
		"node1":                   "node1",
		"node1,node2":             "node1",
		"gpu[03-05]":              "gpu03",
		"gpu[9,03-05],x":          "gpu9",
		"rack[1-2]-n[01-04],misc": "rack1-n[01-04]", // Slurm's hostlists nest no further than one range in practice
	} {
		got, err := nccl.FirstHost(list)
		require.NoError(t, err, list)
		assert.Equal(t, want, got, list)
	}
	for _, bad := range []string{"", "gpu[", "gpu[a-b]", "gpu[]"} {
		_, err := nccl.FirstHost(bad)
		assert.Error(t, err, bad)
	}
}

// JoinFromEnv joins through rank 0's address on the device of the local rank: one
// rank, on the fake NCCL.
func TestJoinFromEnvFake(t *testing.T) {
	cudatest.Require(t)
	f := nccl.InstallFakeNCCL(t)
	t.Setenv("RANK", "0")
	t.Setenv("WORLD_SIZE", "1")
	t.Setenv("LOCAL_RANK", "0")
	t.Setenv("MASTER_ADDR", "127.0.0.1")
	t.Setenv("MASTER_PORT", "1") // a one-rank communicator needs no exchange
	c, l, err := nccl.JoinFromEnv(t.Context())
	require.NoError(t, err)
	assert.Equal(t, "torchrun", l.Launcher)
	assert.Equal(t, 0, c.Rank())
	assert.Equal(t, 1, c.Size())
	require.Len(t, f.Inits, 1)
	require.NoError(t, c.Close())
}
