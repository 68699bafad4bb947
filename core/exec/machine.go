package exec

import (
	"github.com/eidolon-sim/eidolon/core/compute"
	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/model"
	"github.com/eidolon-sim/eidolon/core/net"
	"github.com/eidolon-sim/eidolon/core/sim"
	"github.com/eidolon-sim/eidolon/core/spec"
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

// NewMachine builds the machine a validated spec describes. Faults at time
// 0 are in force before the run starts; later ones are scheduled.
func NewMachine(c spec.Cluster, gpu string, faults spec.Faults, seed uint64) (*Machine, error) {
	g, ok := hw.GPUByName(gpu)
	if !ok {
		var p spec.Problems
		p.OneOf("gpu", gpu, hw.GPUNames())
		return nil, p.Err()
	}
	t, err := topo.FromSpec(c)
	if err != nil {
		return nil, err
	}
	return NewMachineOn(t, g, faults, seed)
}

// NewMachineOn is NewMachine on a topology already built (fault sweeps
// reuse one topology and its cached routes across samples; they restore
// its link health and failed devices between runs).
func NewMachineOn(t *topo.Topology, g hw.GPU, faults spec.Faults, seed uint64) (*Machine, error) {
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

// Cost prices an operator on the machine's GPU as its stream runs it: the
// kernels' device time, no shorter than the host's dispatch of them.
func (m *Machine) Cost(o model.Op) (float64, error) {
	c, err := m.eval.Price(o)
	return c.Issued(m.GPU.HostDispatchS), err
}

// Options are the run options for this machine.
func (m *Machine) Options(full bool) Options {
	return Options{Fabric: m.Fabric, Cost: m.Cost, Full: full || m.Timed,
		CollectiveLaunchS: NCCLBaseLatencyS, DispatchS: m.GPU.HostDispatchS, Protocol: true}
}
