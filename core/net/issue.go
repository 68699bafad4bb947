package net

import "slices"

// How a benchmark loop issues a collective's calls back to back, which
// bounds each call from below: a call cannot finish before the host has
// issued it, and the next cannot start before the host is done with this
// one. The training and inference kinds model their hosts themselves
// (core/exec); these modes are for timing a collective alone as a
// benchmark does.
const (
	// IssueDevice: the collective alone, as the device runs it (what the
	// training kinds charge for one call; a captured graph).
	IssueDevice = "device"
	// IssueTorch: eager torch.distributed calls, one process per GPU (a
	// PyTorch benchmark loop; Vidur's collective profiling): each rank
	// issues its call through Python, c10d's ProcessGroupNCCL and NCCL's
	// enqueue, and a rank's kernel waits inside for the peers' calls, so a
	// call lasts at least the host's issue interval.
	IssueTorch = "torch"
	// IssueNCCLTests: nccl-tests' all_reduce_perf loop, one thread
	// launching the kernels of GPUsPerThread GPUs (-g) one after another
	// every iteration: a call lasts at least those launches.
	IssueNCCLTests = "nccl_tests"
)

// IssueModes lists the modes, the default first.
func IssueModes() []string { return []string{IssueDevice, IssueTorch, IssueNCCLTests} }

// HostIssue are a host's figures for issuing NCCL calls.
type HostIssue struct {
	// TorchIssueS: the interval at which one process issues back-to-back
	// eager torch.distributed calls (besides ChannelS per channel).
	TorchIssueS float64
	// LaunchS: one GPU's share of an nccl-tests iteration on the host
	// (besides ChannelS per channel).
	LaunchS float64
	// ChannelS: NCCL's host work per channel of a call (the per-channel
	// work it enqueues for the kernel).
	ChannelS float64
}

// Floor is the shortest a call on `channels` channels lasts when issued
// in mode by a thread driving gpusPerThread GPUs (nccl_tests; the others
// ignore it); 0 for IssueDevice.
func (h HostIssue) Floor(mode string, gpusPerThread, channels int) float64 {
	perChannel := h.ChannelS * float64(max(channels, 1))
	switch mode {
	case IssueTorch:
		return h.TorchIssueS + perChannel
	case IssueNCCLTests:
		return float64(max(gpusPerThread, 1)) * (h.LaunchS + perChannel)
	}
	return 0
}

// measuredHost is a cluster preset's host figures and the modes they were
// measured in.
type measuredHost struct {
	h            HostIssue
	torch, tests bool
}

// measuredHosts are the hosts of the cluster presets that have issue
// measurements, fitted in bench/fidelity (FitHost; `go test
// ./bench/fidelity -run TestNCCLFitIsOptimal -v` fails if these are not
// the optimum on the fitting split):
//   - dgx-a100: nccl-tests all_reduce_perf -g 8 on an 8×A100 NVSwitch node
//     (stas00/ml-engineering, network/README.md) is flat at 101 µs from
//     1 to 4 MiB and grows from 43.8 µs at 32 KiB (one channel) to
//     101.9 µs at 1 MiB (24): 8 × (5.2 µs + 0.3 µs a channel); Vidur's
//     DGX A100 all-reduce kernel times under torch.distributed below
//     1 MiB (microsoft/vidur, data/profiling/network/a100_dgx) give the
//     issue interval, 19.5 µs, where the tables' NCCL release (2.19,
//     bench/fidelity MeasuredNCCLRelease) prices their sizes: the medians
//     there are bimodal, and the fit's optimum sits below the lower mode,
//     LL's own device time, 25–40 µs (31.5 µs with the newest tuner's
//     choices).
//   - dgx-h100: Vidur's DGX H100 all-reduce kernel times below 1 MiB,
//     31 µs (no nccl-tests sweep: nccl_tests needs host.launch_s).
var measuredHosts = map[string]measuredHost{
	"dgx-a100": {HostIssue{TorchIssueS: 19.5e-6, LaunchS: 5.2e-6, ChannelS: 0.3e-6}, true, true},
	"dgx-h100": {HostIssue{TorchIssueS: 31e-6}, true, false},
}

// MeasuredHost returns a cluster preset's host figures when they were
// measured for mode (for IssueDevice, whatever the preset has measured).
func MeasuredHost(preset, mode string) (HostIssue, bool) {
	m, ok := measuredHosts[preset]
	if !ok {
		return HostIssue{}, false
	}
	switch mode {
	case IssueTorch:
		return m.h, m.torch
	case IssueNCCLTests:
		return m.h, m.tests
	}
	return m.h, true
}

// MeasuredHostPresets names the presets with host figures measured for
// mode, sorted.
func MeasuredHostPresets(mode string) []string {
	var out []string
	for p := range measuredHosts {
		if _, ok := MeasuredHost(p, mode); ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
