package main

import (
	"github.com/gocuda/gocuda/cuda/cudaraw"
	"github.com/gocuda/gocuda/cupti/cuptiraw"
	"github.com/gocuda/gocuda/nvml/nvmlraw"
)

// Probes of NVML's and CUPTI's handles (headers/nvml.toml, headers/cupti.toml). NVML is
// initialized for each probe and shut down by its cleanup (NVML counts its Inits). The
// CUPTI subscriber is made with no callback (CUPTI keeps the subscription all the same);
// an event group needs the legacy event API, which compute capability 7.5 and newer
// refuse: there the probe reports CUPTI's error instead of a time.

func init() {
	for name, ps := range map[string][]Probe{
		"nvmlEventSetFree": {{Make: nvmlProbe(func() (func() error, error) {
			var set nvmlraw.NvmlEventSet
			if err := nvmlraw.EventSetCreate(&set); err != nil {
				return nil, err
			}
			return func() error { return nvmlraw.EventSetFree(set) }, nil
		})}},
		"nvmlGpmSampleFree": {{Make: nvmlProbe(func() (func() error, error) {
			var s nvmlraw.NvmlGpmSample
			if err := nvmlraw.GpmSampleAlloc(&s); err != nil {
				return nil, err
			}
			return func() error { return nvmlraw.GpmSampleFree(s) }, nil
		})}},
		"cuptiUnsubscribe": {{Make: func(e *Env) (func() error, func(), error) {
			var sub cuptiraw.CUpti_SubscriberHandle
			if err := cuptiraw.Subscribe(&sub, 0, nil); err != nil {
				return nil, nil, err
			}
			return func() error { return cuptiraw.Unsubscribe(sub) }, noCleanup, nil
		}}},
		"cuptiEventGroupDestroy": {{Make: func(e *Env) (func() error, func(), error) {
			var g cuptiraw.CUpti_EventGroup
			if err := cuptiraw.EventGroupCreate(e.Ctx, &g, cudaraw.Cuuint32(0)); err != nil {
				return nil, nil, err
			}
			return func() error { return cuptiraw.EventGroupDestroy(g) }, noCleanup, nil
		}}},
	} {
		if _, dup := probes[name]; dup {
			panic("blockprobe: two probe sets for " + name + " (probes.go and probes_nvml.go)")
		}
		probes[name] = ps
	}
}

// nvmlProbe initializes NVML, makes the handle with mk and returns its release; the
// cleanup shuts NVML down.
func nvmlProbe(mk func() (func() error, error)) func(e *Env) (func() error, func(), error) {
	return func(e *Env) (func() error, func(), error) {
		if err := nvmlraw.Init(); err != nil {
			return nil, nil, err
		}
		release, err := mk()
		if err != nil {
			_ = nvmlraw.Shutdown()
			return nil, nil, err
		}
		return release, func() { _ = nvmlraw.Shutdown() }, nil
	}
}
