package exec

import (
	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/topo"
)

// Machine is a cluster ready to run a plan: a kernel, a congestion-aware
// fabric over the cluster's topology with faults applied, and the GPU's
// compute model.
type Machine struct {
	GPU    hw.GPU
	Fabric *net.FlowNet
	Faults []net.FaultEvent
	// Timed is true when some fault happens after time 0 (mirroring is
	// then off: the fault may hit replicas at different moments).
	Timed bool
	eval  *compute.Evaluator
}

// NewMachine builds the machine of a topology (its routes cached, so fault
// sweeps reuse one across samples and restore its link health and failed
// devices between runs), a GPU and a fault plan of that topology's ids
// (package compile makes all three from a validated spec). Faults at time 0
// are in force before the run starts; later ones are scheduled.
func NewMachine(t *topo.Topology, g hw.GPU, faults net.FaultPlan, seed uint64) (*Machine, error) {
	f := net.NewFlowNet(sim.New(), t)
	evs, err := net.ApplyFaults(f, faults, seed)
	if err != nil {
		return nil, err
	}
	m := &Machine{GPU: g, Fabric: f, Faults: evs, eval: compute.NewEvaluator(g)}
	for _, e := range evs {
		switch {
		case e.At > 0:
			m.Timed = true
		case e.What == "link_health":
			f.SetLinkHealth(e.Link, e.Health)
		case e.What == "device_down", e.What == "device_up":
			f.SetDeviceDown(e.Device, e.What == "device_down")
		}
	}
	return m, nil
}

// Cost is an operator's device time on the machine's GPU (its kernels as
// a profiler times them; the host's issue is exec's Host model): a lower
// bound on its time in a run, as layout searches need.
func (m *Machine) Cost(o model.Op) (float64, error) {
	c, err := m.eval.Op(o)
	return c.TimeS, err
}

// Kernel prices an operator on the machine's GPU for exec.
func (m *Machine) Kernel(o model.Op) (Kernel, error) {
	c, err := m.eval.Op(o)
	if err != nil {
		return Kernel{}, err
	}
	return KernelOf(m.GPU, c), nil
}

// KernelOf is a priced operator as exec schedules it on GPU g.
func KernelOf(g hw.GPU, c compute.Cost) Kernel {
	k := Kernel{DeviceS: c.TimeS, Kernels: max(c.Kernels, 1)}
	if c.Bound == compute.BoundCompute || c.Bound == compute.BoundSMEM {
		k.MathS = c.TimeS
	}
	return k
}

// Interference is the machine's compute–communication interference.
func (m *Machine) Interference() *Interference {
	return &Interference{SMs: m.GPU.SMCount, CTAs: NCCLCTAs, HBMBytesPerS: m.GPU.HBMBandwidth(),
		TrafficPerWireByte: NCCLHBMTrafficPerWireByte}
}

// Options are the run options for this machine: Megatron-LM's eager host
// (set Host for another mode) and interference on.
func (m *Machine) Options(full bool) Options {
	return Options{Fabric: m.Fabric, Kernel: m.Kernel, Full: full || m.Timed,
		CollectiveLaunchS: net.NCCLBaseLatencyS, Protocol: true, Host: EagerHost(), Interference: m.Interference()}
}
