package sim

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestTimeConversions(t *testing.T) {
	require.Equal(t, Second, Seconds(1))
	require.Equal(t, 1.5e-9, (1500 * Picosecond).Seconds())
	require.Equal(t, Time(3), SecondsCeil(2.2e-12))
	require.Equal(t, Time(2), SecondsCeil(2e-12))
	require.Equal(t, Never, Seconds(1e300))
}

func TestOrderByTimeThenSequence(t *testing.T) {
	k := New()
	var got []string
	k.At(20, func() { got = append(got, "c") })
	k.At(10, func() { got = append(got, "a") })
	k.At(10, func() {
		got = append(got, "b")
		k.At(10, func() { got = append(got, "b2") }) // same instant, after b
		k.After(5, func() { got = append(got, "b+5") })
	})
	require.NoError(t, k.Run(context.Background()))
	require.Equal(t, []string{"a", "b", "b2", "b+5", "c"}, got)
	require.Equal(t, Time(20), k.Now())
	require.Equal(t, uint64(5), k.Events())
}

func TestSettleRunsOncePerInstantBeforeTimeAdvances(t *testing.T) {
	k := New()
	var got []string
	settled := false
	mark := func(s string) func() {
		return func() {
			got = append(got, s)
			if !settled {
				settled = true
				k.Settle(func() { got = append(got, "settle@"+k.Now().String()); settled = false })
			}
		}
	}
	k.At(1, mark("x"))
	k.At(1, mark("y"))
	k.At(2, mark("z"))
	require.NoError(t, k.Run(context.Background()))
	require.Equal(t, []string{"x", "y", "settle@1e-12s", "z", "settle@2e-12s"}, got)
}

func TestStallNamesBlockedWork(t *testing.T) {
	k := New()
	waiting := true
	k.OnStall("old", func() []string { return []string{"an earlier run's engine"} })
	k.OnStall("old", func() []string {
		if waiting {
			return []string{"rank 3 waits for rank 2"}
		}
		return nil
	})
	k.OnStall("other", func() []string { return nil })
	k.At(5, func() {})
	err := k.Run(context.Background())
	require.ErrorIs(t, err, ErrStalled)
	require.Contains(t, err.Error(), "rank 3 waits for rank 2")
	require.NotContains(t, err.Error(), "an earlier run's engine", "an owner's later describer replaces its earlier")

	waiting = false
	require.NoError(t, New().Run(context.Background()))
}

func TestCancellationAndFail(t *testing.T) {
	k := New()
	k.CheckEvery = 10
	var tick func()
	tick = func() { k.After(1, tick) } // runs forever
	k.At(0, tick)
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	k.Progress = func(Time, uint64) {
		calls++
		if calls == 3 {
			cancel()
		}
	}
	require.ErrorIs(t, k.Run(ctx), context.Canceled)

	k2 := New()
	boom := errors.New("boom")
	k2.At(1, func() { k2.Fail(boom) })
	k2.At(2, func() { t.Fatal("must not run after Fail") })
	require.ErrorIs(t, k2.Run(context.Background()), boom)
}

// A settle can be long (a fabric's max-min fill), so the run stops at the
// first settle after a cancel, not CheckEvery events later.
func TestCancellationSeenAfterASettle(t *testing.T) {
	k := New()
	ctx, cancel := context.WithCancel(context.Background())
	settles := 0
	var tick func()
	tick = func() {
		k.Settle(func() {
			if settles++; settles == 3 {
				cancel()
			}
		})
		k.After(1, tick)
	}
	k.At(0, tick)
	require.ErrorIs(t, k.Run(ctx), context.Canceled)
	require.Equal(t, 3, settles)
	require.Less(t, k.Events(), uint64(10))
}

func TestSchedulingInThePastPanics(t *testing.T) {
	k := New()
	k.At(10, func() { k.At(5, func() {}) })
	require.Panics(t, func() { _ = k.Run(context.Background()) })
}

func TestRunUntil(t *testing.T) {
	k := New()
	ran := 0
	k.At(5, func() { ran++ })
	k.At(15, func() { ran++ })
	require.NoError(t, k.RunUntil(context.Background(), 10))
	require.Equal(t, 1, ran)
	require.Equal(t, Time(10), k.Now())
	require.Equal(t, 1, k.Pending())
	require.NoError(t, k.Run(context.Background()))
	require.Equal(t, 2, ran)
}

// TestOrderMatchesReferenceOnRandomSchedules: events scheduled from inside
// events at a few fixed delays (what models do, served by the runs) mixed
// with random ones (served by the heap) run in exactly (time, sequence)
// order: every event runs, and the executed (time, creation index) sequence
// is sorted — an event created later has a larger index and a time >= now,
// so any earlier-ordered event still pending would break the order.
func TestOrderMatchesReferenceOnRandomSchedules(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		k := New()
		type ran struct {
			t  Time
			id int
		}
		var got []ran
		created := 0
		delays := []Time{3, 7, 7, 20, 1000}
		var schedule func(at Time)
		schedule = func(at Time) {
			id := created
			created++
			k.At(at, func() {
				got = append(got, ran{k.Now(), id})
				for j := r.IntN(3); j > 0 && created < 5000; j-- {
					d := delays[r.IntN(len(delays))]
					if r.IntN(4) == 0 {
						d = Time(r.IntN(50))
					}
					schedule(k.Now() + d)
				}
			})
		}
		for i := 0; i < 20; i++ {
			schedule(Time(r.IntN(30)))
		}
		require.NoError(t, k.Run(context.Background()))
		require.Len(t, got, created)
		require.Zero(t, k.Pending())
		for i := 1; i < len(got); i++ {
			a, b := got[i-1], got[i]
			require.True(t, a.t < b.t || (a.t == b.t && a.id < b.id), "seed %d: %v ran before %v", seed, a, b)
		}
	}
}

func TestSaturatingArithmetic(t *testing.T) {
	require.Equal(t, Never, Add(Never-5, 10))
	require.Equal(t, Never, Add(Never, Never))
	require.Equal(t, -Never, Add(-Never+5, -10))
	require.Equal(t, Time(7), Add(3, 4))
	require.Equal(t, Never, Mul(Second, 1<<40))
	require.Equal(t, -Never, Mul(-Second, 1<<40))
	require.Equal(t, 3*Second, Mul(Second, 3))
	require.Equal(t, Never, Seconds(math.Pow(2, 40)))
}

// An event past the horizon (a saturated time) fails the run with a
// HorizonError instead of wrapping to a time before now.
func TestEventPastTheHorizonFails(t *testing.T) {
	k := New()
	ran := false
	k.After(Second, func() {
		k.After(Never, func() { ran = true }) // would wrap negative without saturation
	})
	err := k.Run(context.Background())
	var he *HorizonError
	require.ErrorAs(t, err, &he)
	require.Contains(t, err.Error(), "106.75")
	require.False(t, ran)
	// a model that names the quantity first keeps its message
	k = New()
	k.After(Second, func() {
		k.Fail(&HorizonError{Quantity: "a flow of 1e20 bytes"})
		k.At(Never, func() {})
	})
	require.ErrorContains(t, k.Run(context.Background()), "a flow of 1e20 bytes")
	// a model that adds without saturating wraps negative: also a HorizonError
	k = New()
	k.After(Second, func() { k.At(k.Now()+Never, func() {}) })
	require.ErrorAs(t, k.Run(context.Background()), &he)
	require.Contains(t, he.Error(), "wrapped around")
}
