package seedflood

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/eidolon-sim/eidolon/core/problem"
	"github.com/eidolon-sim/eidolon/core/scenario"
	sf "github.com/eidolon-sim/eidolon/core/seedflood"
	"github.com/eidolon-sim/eidolon/core/spec"
	"github.com/eidolon-sim/eidolon/core/table"
	"github.com/stretchr/testify/require"
)

func decode(t *testing.T, doc string) (*spec.SeedFlood, error) {
	t.Helper()
	s := &spec.SeedFlood{}
	if err := spec.Decode([]byte(doc), s); err != nil {
		return nil, err
	}
	s.Defaults()
	var p spec.Problems
	s.Validate(&p)
	return s, p.Err()
}

func runDoc(t *testing.T, doc string) scenario.Result {
	t.Helper()
	s, err := decode(t, doc)
	require.NoError(t, err)
	res, err := Kind().Run(scenario.Env{Ctx: context.Background()}, s)
	require.NoError(t, err)
	return res
}

func TestScenarioTables(t *testing.T) {
	res := runDoc(t, `{"kind":"seedflood","seed":3,
		"topology":{"kind":"mesh","clients":6},
		"model":{"kind":"mlp","hidden":[16]},
		"dataset":{"samples":600,"n_features":8,"classes":4},
		"steps":40,"eval_every_steps":10,"projection":{"clients":16}}`)
	require.Equal(t, []string{"history", "summary", "projection"}, []string{res.Tables[0].Name, res.Tables[1].Name, res.Tables[2].Name})
	hist := res.Tables[0].Rows.([]HistoryRow)
	require.Len(t, hist, 5*5, "5 methods × (step 0 + 4 evaluations)")
	sum := res.Tables[1].Rows.([]SummaryRow)
	require.Len(t, sum, 5)
	for _, r := range sum {
		require.Equal(t, "mesh(2x3)", r.Topology)
		if r.Method == "mezo" {
			require.Zero(t, r.TotalBytes)
		} else {
			require.Positive(t, r.TotalBytes, r.Method)
		}
	}
	proj := res.Tables[2].Rows.([]ProjectionRow)
	require.Len(t, proj, 5)
	// Mesh 4×4 (16 clients, 24 edges): DSGD sends 2·24 models of 4·1.3e9 bytes per round.
	require.Equal(t, "dsgd", proj[1].Method)
	require.InDelta(t, 2*24*4*1.3e9, proj[1].BytesPerRound, 1)
	require.Equal(t, "seedflood", proj[0].Method)
	require.Equal(t, 1.0, proj[0].RatioToSeedFlood)
	require.Greater(t, proj[1].RatioToSeedFlood, 1e7)
	for _, tb := range res.Tables {
		rec, err := table.Record(tb.Rows, nil)
		require.NoError(t, err, tb.Name)
		rec.Release()
	}
}

// The projection's SeedFlood bytes equal the simulated traffic of one step
// on the same graph (same function, same graph).
func TestProjectionMatchesSimulatedTraffic(t *testing.T) {
	s, err := decode(t, `{"kind":"seedflood","topology":{"kind":"ring","clients":8},"model":{"kind":"softmax"},
		"dataset":{"samples":200,"n_features":4,"classes":3},"methods":["seedflood"],"steps":3,
		"projection":{"clients":8,"params":1e6}}`)
	require.NoError(t, err)
	res, err := Kind().Run(scenario.Env{}, s)
	require.NoError(t, err)
	sum := res.Tables[1].Rows.([]SummaryRow)[0]
	proj := res.Tables[2].Rows.([]ProjectionRow)[0]
	require.Equal(t, float64(sum.TotalBytes)/3, proj.BytesPerRound)
	// Even ring: 8 origins × 8 transmissions × 20 bytes.
	require.Equal(t, float64(8*8*sf.SeedMessageBytes), proj.BytesPerRound)
}

func TestInlineDataset(t *testing.T) {
	// Two well separated classes in 2 features, rows given inline.
	var feats [][]float64
	var labels []int
	for i := 0; i < 200; i++ {
		y := i % 2
		feats = append(feats, []float64{float64(4*y-2) + 0.1*float64(i%7), float64(i % 5)})
		labels = append(labels, y)
	}
	doc, _ := json.Marshal(map[string]any{
		"kind": "seedflood", "topology": map[string]any{"kind": "ring", "clients": 4},
		"model": map[string]any{"kind": "softmax"}, "methods": []string{"seedflood", "dsgd"},
		"dataset": map[string]any{"kind": "inline", "features": feats, "labels": labels},
		"steps":   100, "learning_rate": 0.05,
	})
	res := runDoc(t, string(doc))
	for _, r := range res.Tables[1].Rows.([]SummaryRow) {
		require.Greater(t, r.FinalAccuracy, 0.9, r.Method)
	}
}

func TestSpecProblemsHaveFieldPaths(t *testing.T) {
	_, err := decode(t, `{"kind":"seedflood","topology":{"kind":"mesh","clients":6,"rows":4,"cols":2},
		"model":{"kind":"softmax","hidden":[3]},"methods":["seedflod"],"learning_rate":-1,
		"dataset":{"kind":"inline","features_flat":[1,2,3],"n_features":2,"labels":[0,1]},
		"partition":{"kind":"dirichlet","alpha":-1},"projection":{"clients":1}}`)
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{
		"topology.rows: rows × cols must equal clients (6), got 4 × 2",
		"model.hidden: must be empty for softmax",
		`methods[0]: must be one of`, `(did you mean "seedflood"?)`,
		"learning_rate: must be > 0, got -1",
		"dataset.features_flat: must hold n_features (2) × labels (2) values, got 3",
		"partition.alpha: must be > 0",
		"projection.clients: must be in [2, 4096], got 1", // no links: each ratio to SeedFlood's bytes was 0/0
	} {
		require.Contains(t, msg, want)
	}
}

// Too few training rows for the clients is a problem of the spec, named by
// field (it was a simulation error): 60 samples less a quarter for the test
// split leave 45 rows for 400 clients; inline data pre-trained on a source
// split lose that split's rows too (8 labels: 6 after the test split, 3
// after the source split, for 4 clients).
func TestTooFewTrainingRowsIsASpecProblem(t *testing.T) {
	_, err := decode(t, `{"kind":"seedflood","topology":{"kind":"ring","clients":400},"dataset":{"samples":60}}`)
	require.ErrorContains(t, err, "dataset.samples: the training split (45 of 60 rows, after the test split and any source split) must give each of the 400 clients (topology.clients) a row")
	inline := `{"kind":"seedflood","topology":{"kind":"ring","clients":4},"pretrain":{"kind":"%s"},
		"dataset":{"kind":"inline","features_flat":[1,2,3,4,5,6,7,8],"n_features":1,"labels":[0,1,0,1,0,1,0,1]}}`
	_, err = decode(t, fmt.Sprintf(inline, "source"))
	require.ErrorContains(t, err, "dataset.labels: the training split (3 of 8 rows")
	_, err = decode(t, fmt.Sprintf(inline, "none"))
	require.NoError(t, err)
}

// An inline feature too large for the float32 the data is stored in is a
// problem of the spec at its index, and labels of one class a problem of
// the labels (both were simulation errors naming only "dataset").
func TestBadInlineDataIsASpecProblem(t *testing.T) {
	spec := `{"kind":"seedflood","topology":{"kind":"ring","clients":2},"dataset":{"kind":"inline",%s,"labels":[0,1,0,1,0,1,0,1]}}`
	_, err := decode(t, fmt.Sprintf(spec, `"features_flat":[1,2,3,-1e31,5,6,7,8],"n_features":1`))
	require.ErrorContains(t, err, "dataset.features_flat[3]: magnitude must be <= 1e+30, got -1e+31")
	_, err = decode(t, fmt.Sprintf(spec, `"features":[[1],[2],[3],[4],[5],[6e30],[7],[8]],"n_features":1`))
	require.ErrorContains(t, err, "dataset.features[5][0]: magnitude must be <= 1e+30, got 6e+30")
	_, err = decode(t, fmt.Sprintf(spec, `"features_flat":[1,2,3,-1e30,5,6,7,8],"n_features":1`))
	require.NoError(t, err)
	one := `{"kind":"seedflood","topology":{"kind":"ring","clients":2},"dataset":{"kind":"inline","features_flat":[1,2,3,4],"n_features":1,"labels":[0,0,0,0]}}`
	_, err = decode(t, one)
	require.ErrorContains(t, err, "dataset.labels: need at least 2 classes (labels 0..k-1), got only label 0")
}

// A field another topology kind or the link model reads is refused, not
// ignored: a ring given a degree still ran as a ring.
func TestFieldsOfAnotherTopologyAreRefused(t *testing.T) {
	for _, tc := range []struct{ extra, want string }{
		{`"topology":{"kind":"ring","clients":8,"degree":3}`, `topology.degree: applies to topology kind "random_regular", not "ring"`},
		{`"topology":{"kind":"complete","clients":8,"probability":0.5}`, `topology.probability: applies to topology kind "erdos_renyi", not "complete"`},
		{`"topology":{"kind":"random_regular","clients":8,"rows":2}`, `topology.rows: applies to topology kind "mesh" or "torus", not "random_regular"`},
		{`"topology":{"kind":"ring","clients":8},"step_time_s":1e-3`, "step_time_s: applies with link"},
	} {
		_, err := decode(t, `{"kind":"seedflood",`+tc.extra+`,"model":{"kind":"softmax"},"dataset":{"samples":100,"n_features":2,"classes":2},"steps":2}`)
		require.ErrorContains(t, err, tc.want)
	}
}

// A seed that draws a disconnected random graph is the spec's problem,
// named at the field that makes the graph denser.
func TestDisconnectedGraphIsASpecProblem(t *testing.T) {
	for _, tc := range []struct{ topo, path string }{
		{`{"kind":"erdos_renyi","clients":12,"probability":0.01}`, "topology.probability"},
		{`{"kind":"random_regular","clients":12,"degree":1}`, "topology.degree"},
	} {
		s, err := decode(t, `{"kind":"seedflood","topology":`+tc.topo+`,
			"model":{"kind":"softmax"},"dataset":{"samples":100,"n_features":2,"classes":2},"steps":2}`)
		require.NoError(t, err)
		_, err = Kind().Run(scenario.Env{}, s)
		var pe *problem.Error
		require.ErrorAs(t, err, &pe, tc.topo)
		require.Equal(t, tc.path, pe.Problems[0].Path)
		require.Contains(t, pe.Problems[0].Message, "disconnected")
	}
}

// With a link preset, a message h hops away arrives ⌈h·hop_time/step_time⌉
// steps later, hop_time = latency + 20 bytes / bandwidth.
func TestLinkModelDelay(t *testing.T) {
	s, err := decode(t, `{"kind":"seedflood","topology":{"kind":"ring","clients":8},"model":{"kind":"softmax"},
		"dataset":{"samples":200,"n_features":4,"classes":3},"methods":["seedflood"],"steps":3,
		"link":"eth-100g","step_time_s":4e-6}`)
	require.NoError(t, err)
	cfg, err := Config(s, scenario.Env{})
	require.NoError(t, err)
	// eth-100g: 10 µs + 20 B / 12.5 GB/s = 10.0016 µs per hop; over 4 µs steps
	// one hop is ⌈2.5004⌉ = 3 steps, four hops ⌈10.0016⌉ = 11 steps.
	require.Equal(t, 3, cfg.DelaySteps(1))
	require.Equal(t, 11, cfg.DelaySteps(4))
	_, err = decode(t, `{"kind":"seedflood","topology":{"kind":"ring","clients":8},"model":{"kind":"softmax"},
		"link":"eth-10g","steps_per_hop":2}`)
	require.ErrorContains(t, err, "steps_per_hop: give steps_per_hop or link, not both")
	require.ErrorContains(t, err, `link: must be one of`)
	require.ErrorContains(t, err, "step_time_s: must be > 0")
}

// A canceled context stops the run before any method finishes.
func TestCancellation(t *testing.T) {
	s, err := decode(t, `{"kind":"seedflood","topology":{"kind":"ring","clients":8},"model":{"kind":"softmax"},
		"dataset":{"samples":200,"n_features":4,"classes":3},"steps":100000}`)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = Kind().Run(scenario.Env{Ctx: ctx}, s)
	require.ErrorIs(t, err, context.Canceled)
}

// A spec without a model trains softmax regression; an unknown model kind
// is still a problem that names the field.
func TestModelKindDefault(t *testing.T) {
	s, err := decode(t, `{"kind":"seedflood","topology":{"kind":"ring","clients":4},"steps":2}`)
	require.NoError(t, err)
	require.Equal(t, "softmax", s.Model.Kind)
	_, err = decode(t, `{"kind":"seedflood","topology":{"kind":"ring","clients":4},"model":{"kind":"cnn"},"steps":2}`)
	require.ErrorContains(t, err, "model.kind")
}

// With a clock (as the bindings pass one) every method reports its wall
// time; without one the column is null, so Go runs stay bit-for-bit equal.
func TestWallTimeFromInjectedClock(t *testing.T) {
	s, err := decode(t, `{"kind":"seedflood","topology":{"kind":"ring","clients":4},"methods":["seedflood","dsgd"],
		"dataset":{"samples":60,"n_features":3,"classes":2},"steps":2}`)
	require.NoError(t, err)
	tick := 0.0
	clock := func() float64 { tick += 0.25; return tick }
	res, err := Kind().Run(scenario.Env{Clock: clock}, s)
	require.NoError(t, err)
	for _, row := range res.Tables[1].Rows.([]SummaryRow) {
		require.NotNil(t, row.WallS, row.Method)
		require.Equal(t, 0.25, *row.WallS, "one tick between a method's start and end")
	}
	res, err = Kind().Run(scenario.Env{}, s)
	require.NoError(t, err)
	for _, row := range res.Tables[1].Rows.([]SummaryRow) {
		require.Nil(t, row.WallS)
	}
}
