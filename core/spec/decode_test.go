package spec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type innerSpec struct {
	BandwidthBytesPerS float64 `json:"bandwidth_bytes_per_s"`
	Count              int     `json:"count,omitempty"`
}

type testSpec struct {
	Header
	Links   []innerSpec          `json:"links"`
	Weights map[string]float64   `json:"weights,omitempty"`
	Ptr     *innerSpec           `json:"ptr,omitempty"`
	Small   int8                 `json:"small,omitempty"`
	Flag    bool                 `json:"flag,omitempty"`
	Named   map[string]innerSpec `json:"named,omitempty"`
	GPU     GPU                  `json:"gpu,omitzero"`
	Link    Link                 `json:"link,omitzero"`
}

func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	require.Error(t, err)
	se, ok := err.(*Error)
	require.True(t, ok, "want *spec.Error, got %T: %v", err, err)
	return se.Problems
}

func TestDecodeAcceptsValidSpec(t *testing.T) {
	var s testSpec
	err := Decode([]byte(`{"kind":"x","seed":3,"links":[{"bandwidth_bytes_per_s":1e9,"count":2}],
		"weights":{"a":1.5},"ptr":{"bandwidth_bytes_per_s":5},"small":-128,"flag":true}`), &s)
	require.NoError(t, err)
	require.Equal(t, "x", s.Kind)
	require.Equal(t, uint64(3), s.Seed)
	require.Equal(t, 2, s.Links[0].Count)
	require.Equal(t, 5.0, s.Ptr.BandwidthBytesPerS)
	require.Equal(t, int8(-128), s.Small)
}

// Integers written as floats (what pandas and numpy hand over: 1000.0,
// 1e3) decode as integers, in fields, lists and maps; a fraction stays a
// problem.
func TestDecodeTakesWholeFloatsForIntegers(t *testing.T) {
	var s testSpec
	require.NoError(t, Decode([]byte(`{"kind":"x","seed":3e0,"small":-128.0,"links":[{"count":2.0}],"named":{"a":{"count":1e2}}}`), &s))
	require.Equal(t, uint64(3), s.Seed)
	require.Equal(t, int8(-128), s.Small)
	require.Equal(t, 2, s.Links[0].Count)
	require.Equal(t, 100, s.Named["a"].Count)
	ps := problemsOf(t, Decode([]byte(`{"kind":"x","links":[{"count":2.5}]}`), &s))
	require.Equal(t, "links[0].count", ps[0].Path)
	require.Equal(t, "must be an integer, got 2.5", ps[0].Message)
}

func TestDecodeReportsEveryProblemWithPath(t *testing.T) {
	var s testSpec
	err := Decode([]byte(`{"kind":"x","seed":-1,"links":[{"bandwidth_bytes_per_s":1},{"bandwith_bytes_per_s":2,"count":1.5}],
		"small":300,"flag":"yes","named":{"b":{"count":"3"}}}`), &s)
	ps := problemsOf(t, err)
	got := map[string]string{}
	for _, p := range ps {
		got[p.Path] = p.Message
	}
	require.Len(t, ps, 6, "%v", err)
	require.Contains(t, got["seed"], "must be an integer in [0,")
	require.Contains(t, got["links[1].bandwith_bytes_per_s"], `did you mean "bandwidth_bytes_per_s"?`)
	require.Contains(t, got["links[1].count"], "must be an integer, got 1.5")
	require.Contains(t, got["small"], "[-128, 128)")
	require.Contains(t, got["flag"], "must be true or false")
	require.Contains(t, got["named.b.count"], "must be an integer, got a string")
	require.Contains(t, err.Error(), "6 problems")
}

func TestDecodeRejectsBadDocuments(t *testing.T) {
	for _, doc := range []string{``, `[1,2]`, `{"kind":`, `{"kind":"x"} {}`, `"str"`} {
		var s testSpec
		require.Error(t, Decode([]byte(doc), &s), doc)
	}
}

func TestKind(t *testing.T) {
	k, err := Kind([]byte(`{"kind":"collective"}`))
	require.NoError(t, err)
	require.Equal(t, "collective", k)
	_, err = Kind([]byte(`{"seed":1}`))
	require.Equal(t, "kind", problemsOf(t, err)[0].Path)
	_, err = Kind([]byte(`[]`))
	require.Error(t, err)

	// Read without building the tree, the kind is what the tree says.
	for doc, want := range map[string]string{
		`{"kind":"a","x":[1,2,{"kind":"inner"}],"kind":"b"}`: "b", // the last, as a decoded map keeps it
		`{"KIND":"training"}`:                                "",  // keys match exactly
		`{"kind":""}`:                                        "",
		`{"kind":3}`:                                         "",
		`{"kind":"serving"} {"kind":"x"}`:                    "", // trailing data
		`{"kind":"serving"`:                                  "",
		`{"seed":1,"kind":"ssm_tp"}`:                         "ssm_tp",
		` {"kind" : "eidola" } `:                             "eidola",
		`{"a":{"kind":"nested"}}`:                            "",
		`{"kind":"x","bad":[1,}`:                             "",
	} {
		got, ok := topLevelKind([]byte(doc))
		require.Equal(t, want, got, doc)
		require.Equal(t, want != "", ok, doc)
		k, err := Kind([]byte(doc))
		if want != "" {
			require.NoError(t, err, doc)
			require.Equal(t, want, k, doc)
		} else {
			require.Error(t, err, doc)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	in := testSpec{Header: Header{Kind: "x", Seed: 42, Name: "n"},
		Links:   []innerSpec{{BandwidthBytesPerS: 2.5e10, Count: 3}},
		Weights: map[string]float64{"a": 0.25}, Ptr: &innerSpec{BandwidthBytesPerS: 1}}
	data, err := json.Marshal(in)
	require.NoError(t, err)
	var out testSpec
	require.NoError(t, Decode(data, &out))
	require.Equal(t, in, out)
}

func TestProblemHelpers(t *testing.T) {
	var p Problems
	p.Positive("a", -5)
	p.Positive("b", 1)
	p.NonNegative("c", -1)
	p.InRange("d", 2, 0, 1)
	p.IntInRange("e", 9, 0, 8)
	require.True(t, p.OneOf("f", "ring", []string{"ring", "tree"}))
	require.False(t, p.OneOf("g", "rign", []string{"ring", "tree"}))
	err := p.Err()
	ps := problemsOf(t, err)
	require.Len(t, ps, 5)
	require.Equal(t, "a: must be > 0, got -5", ps[0].String())
	require.Contains(t, ps[4].Message, `did you mean "ring"?`)
	// Allowed states each helper's bound on its own, for programs.
	allowed := make([]string, len(ps))
	for i, q := range ps {
		allowed[i] = q.Allowed
	}
	require.Equal(t, []string{"> 0", ">= 0", "[0, 1]", "[0, 8]", `one of ["ring", "tree"]`}, allowed)
	var other Problems
	other.Addf("h", "free text")
	other.Duration("i", -1)
	other.Bandwidth("j", 25)
	require.Equal(t, []Problem{
		{Path: "h", Message: "free text"},
		{Path: "i", Message: "must be a duration in [0, 1e+06] s (simulated time ends after about 106.75 days), got -1", Allowed: "[0, 1e+06]"},
		{Path: "j", Message: "must be a bandwidth in bytes/s, at least 1e+06 (1 MB/s; 25 GB/s is 25e9), got 25", Allowed: ">= 1e+06"},
	}, other.List())
	require.Equal(t, "cluster.links[3]", Index(Field("cluster", "links"), 3))
	var none Problems
	require.NoError(t, none.Err())
}

// FuzzDecode: decoding arbitrary bytes never panics, and whatever decodes
// cleanly re-encodes to a document that decodes to the same value.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"kind":"x","links":[{"bandwidth_bytes_per_s":1e9}]}`))
	f.Add([]byte(`{"kind":"x","seed":18446744073709551615,"small":-128}`))
	f.Add([]byte(`{"named":{"a":{"count":1}},"ptr":null,"weights":{"w":-0.5}}`))
	f.Add([]byte(`{"links":[{"bandwith":1}],"flag":"no"}`))
	f.Add([]byte(`{"gpu":{"preset":"h100-sxm","sm_count":144,"name":"x","hbm_bytes":"a"}}`))
	f.Add([]byte(`{"gpu":"b200"}`))
	f.Add([]byte(`{"link":{"preset":"ib-ndr","latency_s":1e-6,"bandwidth_bytes_per_s":"x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s testSpec
		if err := Decode(data, &s); err != nil {
			if !strings.HasPrefix(err.Error(), "invalid spec") {
				t.Fatalf("error without the spec prefix: %v", err)
			}
			return
		}
		again, err := json.Marshal(s)
		require.NoError(t, err)
		var s2 testSpec
		require.NoError(t, Decode(again, &s2))
		again2, err := json.Marshal(s2)
		require.NoError(t, err)
		require.JSONEq(t, string(again), string(again2))
	})
}

// A bad element of a list of numbers is named at its index; the good
// ones around it decode (checked first without their paths).
func TestScalarListElementsNamedAtTheirIndex(t *testing.T) {
	var s struct {
		Header
		Xs []float64 `json:"xs"`
		Ns []int     `json:"ns"`
	}
	err := Decode([]byte(`{"kind":"x","xs":[1,2.5,"three",4],"ns":[1,2.0,2.5,1e3]}`), &s)
	ps := problemsOf(t, err)
	require.Len(t, ps, 2)
	require.Equal(t, "ns[2]", ps[0].Path)
	require.Equal(t, "must be an integer, got 2.5", ps[0].Message)
	require.Equal(t, "xs[2]", ps[1].Path)
	require.Equal(t, "must be a number, got a string", ps[1].Message)
}
