package spec

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/eidolon-sim/eidolon/core/hw"

	"github.com/stretchr/testify/require"
)

// clusterProblems decodes a cluster spec, fills defaults, validates it and
// returns the problems by path (nil when valid) and the defaulted spec.
func clusterProblems(t *testing.T, js string) (map[string]string, Cluster) {
	t.Helper()
	var c Cluster
	require.NoError(t, Decode([]byte(js), &c))
	c.Defaults()
	var p Problems
	c.Validate(&p, "cluster")
	if p.Err() == nil {
		return nil, c
	}
	got := map[string]string{}
	for _, pr := range problemsOf(t, p.Err()) {
		got[pr.Path] = pr.Message
	}
	return got, c
}

func TestClusterSharedNICsDefaultToPCIeSwitches(t *testing.T) {
	// 4 NICs for 8 GPUs: two GPUs and one NIC per PCIe switch.
	ps, c := clusterProblems(t, `{"topology":"composed","nodes":2,"nics_per_node":4}`)
	require.Nil(t, ps)
	require.Equal(t, 2, c.GPUsPerPCIeSwitch)
	// One NIC per GPU (the default): NICs hang off their GPUs.
	ps, c = clusterProblems(t, `{"topology":"composed","nodes":2}`)
	require.Nil(t, ps)
	require.Equal(t, 0, c.GPUsPerPCIeSwitch)
	// Explicit: 4 GPUs per switch, 2 switches, 2 NICs each.
	ps, c = clusterProblems(t, `{"topology":"composed","nodes":2,"nics_per_node":4,"gpus_per_pcie_switch":4,"host_link":"pcie3-x16"}`)
	require.Nil(t, ps)
	require.Equal(t, 4, c.GPUsPerPCIeSwitch)
	ps, _ = clusterProblems(t, `{"preset":"aws-p4d","nodes":4}`)
	require.Nil(t, ps)
}

func TestClusterNICLayoutErrorsNameTheField(t *testing.T) {
	for _, c := range []struct{ js, path, msg string }{
		// 3 NICs do not divide 8 GPUs and no switch layout is given.
		{`{"topology":"composed","nodes":2,"nics_per_node":3}`, "cluster.nics_per_node", "must divide the GPUs"},
		{`{"topology":"composed","nodes":2,"nics_per_node":4,"gpus_per_pcie_switch":3}`, "cluster.gpus_per_pcie_switch", "must divide gpus_per_node (8), got 3"},
		// 8 GPUs / 2 per switch = 4 switches; 2 NICs leave two switches without one.
		{`{"topology":"composed","nodes":2,"nics_per_node":2,"gpus_per_pcie_switch":2}`, "cluster.nics_per_node", "multiple of the 4 PCIe switches"},
		{`{"topology":"composed","nodes":2,"nics_per_node":4,"gpus_per_pcie_switch":-1}`, "cluster.gpus_per_pcie_switch", "must be >= 0"},
		{`{"topology":"composed","nodes":2,"nics_per_node":0}`, "cluster.nics_per_node", "must be >= 1 when nodes > 1"},
		{`{"topology":"composed","nodes":2,"host_link":"pcie7-x16"}`, "cluster.host_link", "pcie3-x16"},
	} {
		ps, _ := clusterProblems(t, c.js)
		require.Contains(t, ps, c.path, c.js)
		require.Contains(t, ps[c.path], c.msg, c.js)
	}
	// One node needs no fabric: fewer NICs than GPUs that do not divide
	// them are fine there.
	ps, _ := clusterProblems(t, `{"topology":"composed","nodes":1,"nics_per_node":3}`)
	require.Nil(t, ps)
}

// A field that does not shape the cluster's kind is a problem, not a
// setting silently ignored; a preset takes other links.
func TestClusterFieldsThatDoNotApply(t *testing.T) {
	for js, want := range map[string]map[string]string{
		`{"preset":"dgx-h100","nodes":2,"gpus_per_node":4,"link":"nvlink3"}`: {
			"cluster.gpus_per_node": `does not apply to a preset, only to composed; a preset node takes other links (intra_link, nic_link, host_link), anything else is a "composed" topology`,
			"cluster.link":          `does not apply to a preset, only to ring, fully_connected, switch, torus, mesh, leaf_spine; a preset node takes other links (intra_link, nic_link, host_link), anything else is a "composed" topology`,
		},
		`{"topology":"ring","gpus":4,"nic_link":"ib-ndr","nodes":2}`: {
			"cluster.nic_link": `does not apply to topology "ring", only to composed, preset`,
			"cluster.nodes":    `does not apply to topology "ring" (set gpus), got 2`,
		},
		`{"topology":"composed","gpus":16,"dims":[4,4]}`: {
			"cluster.gpus": `does not apply to topology "composed", only to ring, fully_connected, switch, leaf_spine, edges`,
			"cluster.dims": `does not apply to topology "composed", only to torus, mesh`,
		},
		`{"preset":"dgx-h100","nic_link":"ib-xdrr"}`: {
			"cluster.nic_link": `must be one of`,
		},
	} {
		got, _ := clusterProblems(t, js)
		require.Len(t, got, len(want), js)
		for path, msg := range want {
			require.Contains(t, got[path], msg, js)
		}
	}
	ps, c := clusterProblems(t, `{"preset":"dgx-h100","nodes":2,"nic_link":"ib-xdr","host_link":"pcie5-x16"}`)
	require.Nil(t, ps)
	require.Equal(t, "ib-xdr", c.NICLink.Preset)
	require.True(t, c.IntraLink.IsZero()) // the preset's
}

// Every field the applicability table names is a field of the spec (a
// misspelt name would never count as given).
func TestClusterFieldsAreSpecFields(t *testing.T) {
	fields := structFields(reflect.TypeFor[Cluster]())
	for _, f := range clusterFields {
		_, ok := fields[f.name]
		require.True(t, ok, f.name)
	}
}

// A link is a preset or a preset with figures changed; its problems name
// the field.
func TestClusterWhatIfLinks(t *testing.T) {
	ps, c := clusterProblems(t, `{"topology":"composed","nodes":2,"nic_link":{"preset":"ib-ndr","bandwidth_bytes_per_s":1e11,"latency_s":2e-6},
		"intra_link":"nvlink5"}`)
	require.Nil(t, ps)
	nic := c.NICLink.Resolve()
	require.Equal(t, hw.Link{Name: "ib-ndr", BandwidthBytesPerS: 1e11, LatencyS: 2e-6, CollectiveEfficiency: 0.94}, nic)
	require.Equal(t, "nvlink5", c.IntraLink.Resolve().Name)
	js, err := json.Marshal(c)
	require.NoError(t, err)
	var again Cluster
	require.NoError(t, Decode(js, &again))
	require.Equal(t, nic, again.NICLink.Resolve())
	require.Contains(t, string(js), `"intra_link":"nvlink5"`) // a bare preset stays a name

	for js, want := range map[string]map[string]string{
		`{"topology":"ring","gpus":4,"link":{"preset":"nvlink4","bandwith_bytes_per_s":1e12}}`: {
			"cluster.link.bandwith_bytes_per_s": `unknown field (did you mean "bandwidth_bytes_per_s"?)`,
		},
		`{"topology":"ring","gpus":4,"link":{"bandwidth_bytes_per_s":1e12}}`: {"cluster.link.preset": "required"},
		`{"topology":"ring","gpus":4,"link":{"preset":"nvlink9","bandwidth_bytes_per_s":25}}`: {
			"cluster.link.preset":                `must be one of`,
			"cluster.link.bandwidth_bytes_per_s": `must be a bandwidth in bytes/s, at least 1e+06`,
		},
		`{"preset":"dgx-h100","nic_link":{"preset":"ib-ndr","collective_efficiency":1.5}}`: {
			"cluster.nic_link.collective_efficiency": `must be in [0.01, 1], got 1.5`,
		},
	} {
		got, _ := clusterProblems(t, js)
		require.Len(t, got, len(want), js)
		for path, msg := range want {
			require.Contains(t, got[path], msg, js)
		}
	}
}
