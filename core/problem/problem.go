// Package problem is the one problem type of the core: a field path (as the
// user wrote it, "cluster.ranks[3]"), what is wrong and what is allowed.
// Specs (package spec) report them while they validate; the models report
// them with paths relative to their own input, which the compile step
// (package compile) moves under the path of the spec field they came from.
package problem

import (
	"fmt"
	"math"
	"strings"
)

// Problem is one thing wrong with a spec: where (a field path such as
// "cluster.links[3].bandwidth_bytes_per_s") and what is wrong. Allowed,
// where the check knows it, states the values the field may take on its
// own ("> 0", "[1, 16384]", `one of ["ring", "tree"]`); it is "" otherwise.
// The message already says it in words: Allowed is for programs (the
// Python tier exposes it as SpecError.problems[i].allowed).
type Problem struct {
	Path    string
	Message string
	Allowed string
}

func (p Problem) String() string {
	if p.Path == "" {
		return p.Message
	}
	return p.Path + ": " + p.Message
}

// Error is an invalid spec: every problem found, not just the first.
type Error struct {
	Problems []Problem
}

func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return "invalid spec: " + e.Problems[0].String()
	}
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = "  " + p.String()
	}
	return fmt.Sprintf("invalid spec, %d problems:\n%s", len(e.Problems), strings.Join(lines, "\n"))
}

// Problems collects validation problems; the zero value is ready to use.
type Problems struct {
	list []Problem
}

// Addf records a problem at path.
func (p *Problems) Addf(path, format string, args ...any) {
	p.list = append(p.list, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// AddAllowed records a problem at path whose allowed values are known.
func (p *Problems) AddAllowed(path, allowed, format string, args ...any) {
	p.list = append(p.list, Problem{Path: path, Message: fmt.Sprintf(format, args...), Allowed: allowed})
}

// Add records a problem as it is (its Allowed kept), e.g. one from another
// Problems moved under a parent path.
func (p *Problems) Add(q Problem) { p.list = append(p.list, q) }

// List is the problems so far, in order.
func (p *Problems) List() []Problem { return append([]Problem(nil), p.list...) }

// Len is the number of problems so far.
func (p *Problems) Len() int { return len(p.list) }

// Err returns nil when there are no problems, else an *Error holding all of them.
func (p *Problems) Err() error {
	if len(p.list) == 0 {
		return nil
	}
	return &Error{Problems: append([]Problem(nil), p.list...)}
}

// Merge adds the problems of err when it is an *Error, or err itself at path otherwise.
func (p *Problems) Merge(path string, err error) {
	if err == nil {
		return
	}
	if se, ok := err.(*Error); ok {
		p.list = append(p.list, se.Problems...)
		return
	}
	p.Addf(path, "%v", err)
}

// Positive requires v > 0 (and finite).
func (p *Problems) Positive(path string, v float64) {
	if !(v > 0) || math.IsInf(v, 0) {
		p.AddAllowed(path, "> 0", "must be > 0, got %v", v)
	}
}

// NonNegative requires v >= 0 (and finite).
func (p *Problems) NonNegative(path string, v float64) {
	if !(v >= 0) || math.IsInf(v, 0) {
		p.AddAllowed(path, ">= 0", "must be >= 0, got %v", v)
	}
}

// MaxDurationS bounds every duration a spec gives (delays, latencies,
// intervals): 10^6 s, about 11.6 days, a ninth of the horizon of simulated
// time (2^63 ps, about 106.75 days), so sums of a few such stay
// representable and a units slip is caught before a run.
const MaxDurationS = 1e6

// Duration requires 0 <= v <= MaxDurationS.
func (p *Problems) Duration(path string, v float64) {
	if !(v >= 0 && v <= MaxDurationS) {
		p.AddAllowed(path, fmt.Sprintf("[0, %g]", MaxDurationS), "must be a duration in [0, %g] s (simulated time ends after about 106.75 days), got %v", MaxDurationS, v)
	}
}

// MinBandwidthBytesPerS is the least link bandwidth a spec may give: 1 MB/s.
// Real links are 10^9 to 10^12 B/s; a smaller figure is almost always a
// units slip (25 for 25 GB/s), and its transfers would outlast simulated time.
const MinBandwidthBytesPerS = 1e6

// Bandwidth requires MinBandwidthBytesPerS <= v < +Inf.
func (p *Problems) Bandwidth(path string, v float64) {
	if !(v >= MinBandwidthBytesPerS) || math.IsInf(v, 0) {
		p.AddAllowed(path, fmt.Sprintf(">= %g", MinBandwidthBytesPerS), "must be a bandwidth in bytes/s, at least %g (1 MB/s; 25 GB/s is 25e9), got %v", MinBandwidthBytesPerS, v)
	}
}

// InRange requires lo <= v <= hi.
func (p *Problems) InRange(path string, v, lo, hi float64) {
	if !(v >= lo && v <= hi) {
		p.AddAllowed(path, fmt.Sprintf("[%v, %v]", lo, hi), "must be in [%v, %v], got %v", lo, hi, v)
	}
}

// IntInRange requires lo <= v <= hi for integers.
func (p *Problems) IntInRange(path string, v, lo, hi int) {
	if v < lo || v > hi {
		p.AddAllowed(path, fmt.Sprintf("[%d, %d]", lo, hi), "must be in [%d, %d], got %d", lo, hi, v)
	}
}

// OneOf requires v to be one of allowed, suggesting the closest when it is not.
func (p *Problems) OneOf(path, v string, allowed []string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	choices := Quoted(allowed)
	p.AddAllowed(path, "one of "+choices, "must be one of %s, got %q%s", choices, v, DidYouMean(v, allowed))
	return false
}

// Field joins a parent path and a field name.
func Field(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

// Index is the path of element i of a list at parent.
func Index(parent string, i int) string {
	return fmt.Sprintf("%s[%d]", parent, i)
}

// Quoted lists xs as a JSON-like list of strings: ["a", "b"].
func Quoted(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// DidYouMean is " (did you mean "x"?)" or " (did you mean one of "x",
// "y"?)" naming the candidates Suggest finds for s, or "" if none.
func DidYouMean(s string, candidates []string) string {
	return Meant(Suggest(s, candidates))
}

// Meant is " (did you mean "x"?)", " (did you mean one of "x", "y"?)" or
// "" for none, naming what a bad value was likely meant to be.
func Meant(got []string) string {
	switch len(got) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf(" (did you mean %q?)", got[0])
	default:
		q := make([]string, len(got))
		for i, g := range got {
			q[i] = fmt.Sprintf("%q", g)
		}
		return " (did you mean one of " + strings.Join(q, ", ") + "?)"
	}
}

// maxSuggestions bounds how many candidates Suggest names.
const maxSuggestions = 4

// Suggest returns the candidates s was most plausibly meant to be, in
// their order: the one that reads the same but for case and separators
// ("llama-2-7b", "deepseek_v3"); else those that s names a part of, word
// for word ("h100" for "h100-sxm", "p4d" for "aws-p4d"; at most four);
// else the closest by edit distance if it is close enough to be a typo;
// else none.
func Suggest(s string, candidates []string) []string {
	bare := func(x string) string {
		return strings.NewReplacer("-", "", "_", "", " ", "").Replace(strings.ToLower(x))
	}
	for _, c := range candidates {
		if bare(c) == bare(s) {
			return []string{c}
		}
	}
	words := func(x string) string {
		return "-" + strings.NewReplacer("_", "-", " ", "-").Replace(strings.ToLower(x)) + "-"
	}
	var part []string
	if w := words(s); len(w) > 4 {
		for _, c := range candidates {
			if strings.Contains(words(c), w) && len(part) < maxSuggestions {
				part = append(part, c)
			}
		}
	}
	if len(part) > 0 {
		return part
	}
	best, bestD := "", len(s)/2+2
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	if best == "" {
		return nil
	}
	return []string{best}
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Under moves a problem error's paths under prefix ("ranks[2]" under
// "training.cluster" is "training.cluster.ranks[2]"; a problem without a
// path takes prefix itself); other errors, and an empty prefix, pass
// unchanged.
func Under(prefix string, err error) error {
	se, ok := err.(*Error)
	if !ok || prefix == "" {
		return err
	}
	out := &Error{Problems: make([]Problem, len(se.Problems))}
	for i, p := range se.Problems {
		if p.Path == "" {
			p.Path = prefix
		} else {
			p.Path = Field(prefix, p.Path)
		}
		out.Problems[i] = p
	}
	return out
}

// Of collects problems into an error (nil when there are none), each moved
// under prefix.
func Of(prefix string, ps []Problem) error {
	if len(ps) == 0 {
		return nil
	}
	return Under(prefix, &Error{Problems: append([]Problem(nil), ps...)})
}
