package eidola

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/eidolon-sim/eidolon/core/hw"
	"github.com/eidolon-sim/eidolon/core/sim"
)

// SyncMode is how a CTA waits for a flag.
type SyncMode string

const (
	// SpinWait polls every unseen flag once per poll interval; each poll is
	// a memory read that takes L2 bandwidth.
	SpinWait SyncMode = "spin_wait"
	// SpinYield polls with exponential back-off: it sleeps PollIntervalS,
	// then twice that, ... up to BackoffMaxS between polls.
	SpinYield SyncMode = "spin_yield"
	// SyncMon registers the flags with a synchronization monitor (one read
	// each) and sleeps; a flag write wakes the CTA WakeLatencyS later and
	// the CTA reads the flag once more. After SyncMon (Eidola, arXiv
	// 2606.12638, which implements a SyncMon-inspired mechanism to cut
	// polling traffic).
	SyncMon SyncMode = "syncmon"
)

// SyncModes lists the modes in a fixed order.
var SyncModes = []SyncMode{SpinWait, SpinYield, SyncMon}

// SectorBytes is the size of one L2 access: NVIDIA L2 caches move 32-byte
// sectors (CUDA C++ Best Practices Guide, "Coalesced Access to Global
// Memory"). A flag poll reads one sector; tile traffic is counted in sectors.
const SectorBytes = 32

// Config is the detailed GPU and how its CTAs wait.
type Config struct {
	GPU hw.GPU
	// CTAsPerSM resident CTAs per SM (the kernel's occupancy); slots =
	// SMs × CTAsPerSM.
	CTAsPerSM int
	Mode      SyncMode
	// PollIntervalS is the spin-wait poll period and the first spin-yield back-off.
	PollIntervalS float64
	// BackoffMaxS caps the spin-yield back-off.
	BackoffMaxS float64
	// WakeLatencyS is the SyncMon delay from a flag write to the waiter running.
	WakeLatencyS float64
	// ReadLatencyCycles is one flag read's round trip (an L2 hit).
	ReadLatencyCycles int64
}

// Check reports what makes a config unusable, or nil.
func (c Config) Check() error {
	switch {
	case c.GPU.SMCount < 1 || !(c.GPU.ClockHz > 0):
		return fmt.Errorf("GPU %q needs SMs and a clock", c.GPU.Name)
	case !(c.GPU.L2BandwidthBytesPerS > 0) || !(c.GPU.HBMBandwidthBytesPerS > 0):
		return fmt.Errorf("GPU %q needs L2 and HBM bandwidth", c.GPU.Name)
	case c.CTAsPerSM < 1:
		return fmt.Errorf("ctas per SM must be >= 1, got %d", c.CTAsPerSM)
	case !(c.PollIntervalS > 0):
		return fmt.Errorf("poll interval must be > 0, got %v", c.PollIntervalS)
	case c.Mode == SpinYield && !(c.BackoffMaxS >= c.PollIntervalS):
		return fmt.Errorf("back-off cap %v must be >= the poll interval %v", c.BackoffMaxS, c.PollIntervalS)
	case c.WakeLatencyS < 0 || c.ReadLatencyCycles < 0:
		return errors.New("latencies must be >= 0")
	}
	switch c.Mode {
	case SpinWait, SpinYield, SyncMon:
		return nil
	}
	return fmt.Errorf("unknown sync mode %q", c.Mode)
}

// CTAResult is one CTA's life on the detailed GPU.
type CTAResult struct {
	Kind CTAKind
	// Slot is the SM slot it ran in (SM = Slot / CTAsPerSM).
	Slot int
	// Flags is the number of flags it waited for (remote and local).
	Flags int
	// Polls is the flag reads it issued.
	Polls int64
	// StartS: launched on its slot; WaitS: from launch until its last flag
	// was seen; ComputeS: from then until EndS.
	StartS, WaitS, ComputeS, EndS float64
}

// Result is one run of the detailed GPU.
type Result struct {
	Cycles      int64
	KernelTimeS float64
	// PollingReads are flag reads; MemoryReads adds the tile traffic's L2
	// read sectors.
	PollingReads, MemoryReads int64
	// SMIdleFraction is the share of slot-time not spent computing (waiting
	// for flags, or empty in the tail of the last wave).
	SMIdleFraction float64
	CTAs           []CTAResult
	// Events is the number of discrete events simulated.
	Events uint64
}

// Simulate runs the kernel on the detailed GPU with the ghosts' writes taken
// from script. It is event-driven at CTA granularity with times in whole GPU
// clock cycles: CTA launch, flag seen, compute done. Waits are resolved in
// closed form from the flag times (no event per poll); tile durations follow
// the bandwidth left over by polling, recomputed whenever the set of
// computing or polling CTAs changes.
func Simulate(ctx context.Context, k *Kernel, c Config, script []Arrival) (*Result, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	times, err := k.ArrivalTimes(script)
	if err != nil {
		return nil, err
	}
	sk := sim.New()
	g := NewGPU(sk, k, c)
	for i, t := range times {
		g.arrive[i] = cyclesCeil(t, g.clock)
	}
	g.Launch()
	// When a flag becomes visible the CTAs polling for it stop reading it,
	// which gives the tiles bandwidth back, as a delivered write does in a
	// full run: the rates are settled again at every such instant.
	visible := map[int64]bool{}
	for _, c := range g.arrive {
		if !visible[c] {
			visible[c] = true
			g.schedule(evVisible, -1, 0, c)
		}
	}
	if err := sk.Run(ctx); err != nil {
		return nil, err
	}
	return g.Result()
}

type phase uint8

const (
	pending phase = iota
	waiting
	computing
	done
)

type ctaState struct {
	phase   phase
	slot    int
	start   int64 // cycles
	seen    int64 // last flag seen
	end     int64
	polls   int64
	flags   int
	unknown int     // local flags whose time is not known yet
	times   []int64 // known flag times, sorted (for the polling rate)
	cursor  int     // times[:cursor] have arrived by the last rate update
	work    float64 // fraction of the tile left
	cycles  float64 // duration at the current contention, cycles
}

// event kinds
const (
	evWaitDone = iota
	evTick
	evArrive
	// evVisible marks a scripted flag becoming visible: its waiters were
	// resolved in closed form, but the polling traffic drops now.
	evVisible
)

// GPU is the detailed model of one GPU running a kernel on a sim.Kernel that
// it may share with other models (a network, other GPUs): Launch starts the
// kernel at the kernel's current time, Deliver sets a remote flag, OnDone
// hears every finished CTA.
type GPU struct {
	// OnDone, if set, is called when a CTA finishes (at that instant).
	OnDone func(cta int)

	k     *Kernel
	c     Config
	clock float64 // Hz
	sk    *sim.Kernel
	psPer float64 // picoseconds per cycle

	arrive      []int64 // cycle each Expected signal is visible
	ctas        []ctaState
	next        int   // next CTA to launch
	freeSl      []int // free slots
	busy        []int // computing CTAs
	spin        []int // waiting CTAs that poll
	waiters     map[int][]int
	now         int64 // current cycle
	last        int64 // progress accounted up to this cycle
	tickGen     int
	settled     bool
	sigIdx      map[Signal]int
	launchCycle int64

	evs []struct {
		kind, cta, gen int
		cycle          int64
	}

	// per-cycle bandwidths
	l2BW, hbmBW       float64
	poll, capIv, wake int64 // cycles
	readLat           int64
	pollRate          float64 // bytes per cycle of polling, last settle
	busyCycles        float64
	lastEnd           int64
}

// NewGPU prepares the kernel on the detailed GPU; every remote flag is
// unknown until Deliver sets it. c must pass Check.
func NewGPU(sk *sim.Kernel, k *Kernel, c Config) *GPU {
	clock := c.GPU.ClockHz
	m := &GPU{
		k: k, c: c, clock: clock, sk: sk,
		psPer:   1e12 / clock,
		ctas:    make([]ctaState, len(k.CTAs)),
		waiters: map[int][]int{},
		l2BW:    c.GPU.L2BandwidthBytesPerS / clock,
		hbmBW:   c.GPU.HBMBandwidthBytesPerS / clock,
		poll:    max(1, cyclesCeil(c.PollIntervalS, clock)),
		capIv:   max(1, cyclesCeil(c.BackoffMaxS, clock)),
		wake:    cyclesCeil(c.WakeLatencyS, clock),
		readLat: c.ReadLatencyCycles,
	}
	m.capIv = max(m.capIv, m.poll)
	m.arrive = make([]int64, len(k.Expected))
	for i := range m.arrive {
		m.arrive[i] = unknownTime
	}
	return m
}

// unknownTime marks a remote flag not delivered yet.
const unknownTime = -1

// Deliver makes a remote flag visible from the next clock edge on. A signal
// the kernel does not expect, or one delivered twice, fails the run.
func (m *GPU) Deliver(s Signal) {
	j, ok := m.k.signalIndex(s)
	if !ok || m.arrive[j] != unknownTime {
		m.sk.Fail(fmt.Errorf("eidola: unexpected or repeated signal (source %d, chunk %d)", s.Source, s.Chunk))
		return
	}
	cycle := int64(math.Ceil(float64(m.sk.Now())/m.psPer - 1e-9))
	m.schedule(evArrive, j, 0, cycle)
}

// Launch starts the kernel now: the first wave of CTAs takes every slot.
func (m *GPU) Launch() {
	m.now = int64(math.Ceil(float64(m.sk.Now())/m.psPer - 1e-9))
	m.last = m.now
	m.launchCycle = m.now
	slots := m.c.GPU.SMCount * m.c.CTAsPerSM
	for s := slots - 1; s >= 0; s-- {
		m.freeSl = append(m.freeSl, s)
	}
	m.sk.OnStall("eidola", m.describeStall)
	m.launch()
	m.needSettle()
}

// cyclesCeil is the first whole cycle at or after s seconds.
func cyclesCeil(s, clock float64) int64 { return int64(math.Ceil(s*clock - 1e-6)) }

func (m *GPU) at(cycle int64) sim.Time { return sim.Time(math.Round(float64(cycle) * m.psPer)) }

func (m *GPU) schedule(kind, cta, gen int, cycle int64) {
	m.evs = append(m.evs, struct {
		kind, cta, gen int
		cycle          int64
	}{kind, cta, gen, cycle})
	// A cycle taken at or after now maps back to a time at or after now,
	// but for rounding: near 10^6 s a float64 of picoseconds is 128 ps
	// coarse, so cycle·psPer can land a few picoseconds before now.
	m.sk.AtHandler(max(m.at(cycle), m.sk.Now()), m, len(m.evs)-1)
}

// Handle runs one scheduled event.
func (m *GPU) Handle(i int) {
	e := m.evs[i]
	m.now = e.cycle
	switch e.kind {
	case evArrive:
		// Progress up to now runs at the old rates: the flag can wake a
		// waiter and change the polling traffic the tiles share.
		m.advance()
		m.arrive[e.cta] = m.now
		m.release(e.cta)
	case evVisible:
		m.advance()
	case evWaitDone:
		m.advance()
		m.spin = remove(m.spin, e.cta)
		m.beginCompute(e.cta)
	case evTick:
		if e.gen != m.tickGen {
			return
		}
		m.advance()
		var finished []int
		for _, i := range m.busy {
			if m.ctas[i].work <= 1e-9 {
				finished = append(finished, i)
			}
		}
		for _, i := range finished {
			m.finish(i)
		}
	}
	m.needSettle()
}

func (m *GPU) describeStall() []string {
	var out []string
	for i := range m.ctas {
		if m.ctas[i].phase == waiting && m.ctas[i].unknown > 0 {
			var what []string
			for _, s := range m.k.CTAs[i].Remote {
				if j, _ := m.k.signalIndex(s); m.arrive[j] == unknownTime {
					what = append(what, fmt.Sprintf("(source %d, chunk %d)", s.Source, s.Chunk))
				}
			}
			out = append(out, fmt.Sprintf("eidola CTA %d waits for flags %s", i, firstFew(what)))
		}
	}
	return out
}

// launch fills free slots with the next CTAs in launch order.
func (m *GPU) launch() {
	for len(m.freeSl) > 0 && m.next < len(m.ctas) {
		s := m.freeSl[len(m.freeSl)-1]
		m.freeSl = m.freeSl[:len(m.freeSl)-1]
		i := m.next
		m.next++
		m.start(i, s)
	}
}

func (m *GPU) start(i, slot int) {
	cta := &m.k.CTAs[i]
	st := &m.ctas[i]
	st.slot, st.start = slot, m.now
	st.flags = len(cta.Remote) + len(cta.Local)
	if st.flags == 0 {
		st.seen = m.now
		m.beginCompute(i)
		return
	}
	st.phase = waiting
	st.times = make([]int64, 0, st.flags)
	for _, j := range cta.remoteIdx {
		if m.arrive[j] != unknownTime {
			st.times = append(st.times, m.arrive[j])
		} else {
			st.unknown++
			m.waiters[int(j)] = append(m.waiters[int(j)], i)
		}
	}
	for _, j := range cta.Local {
		if m.ctas[j].phase == done {
			st.times = append(st.times, m.ctas[j].end)
		} else {
			st.unknown++
			m.waiters[m.localKey(j)] = append(m.waiters[m.localKey(j)], i)
		}
	}
	slices.Sort(st.times)
	if m.c.Mode != SyncMon {
		m.spin = append(m.spin, i)
	}
	if st.unknown == 0 {
		m.resolve(i)
	}
}

// resolve computes, in closed form, when a waiting CTA sees its last flag
// and how many reads it takes, once every flag time is known.
func (m *GPU) resolve(i int) {
	st := &m.ctas[i]
	w := st.start
	var seen, reads int64
	switch m.c.Mode {
	case SyncMon:
		// One read per flag to check and register; each flag still unset
		// wakes the CTA a wake latency after its write, and is read again.
		seen = w + m.readLat
		reads = int64(len(st.times))
		for _, a := range st.times {
			if a > w {
				reads++
				seen = max(seen, a+m.wake+m.readLat)
			}
		}
	default:
		// Poll rounds at w = t_0 < t_1 < ...; a round reads every flag not
		// yet seen; flag f is seen in the first round t_k >= a_f.
		var last int64
		for _, a := range st.times {
			k := m.roundFor(a - w)
			reads += k + 1
			last = max(last, k)
		}
		seen = w + m.roundTime(last) + m.readLat
	}
	st.polls = reads
	st.seen = seen
	m.schedule(evWaitDone, i, 0, seen)
}

// roundTime is the offset of poll round k from the start of the wait.
func (m *GPU) roundTime(k int64) int64 {
	if m.c.Mode == SpinWait {
		return k * m.poll
	}
	// back-off p, 2p, 4p, ... capped at cap
	var t int64
	iv := m.poll
	for j := int64(0); j < k; j++ {
		if iv >= m.capIv {
			return t + (k-j)*m.capIv
		}
		t += iv
		iv = min(2*iv, m.capIv)
	}
	return t
}

// roundFor is the first round whose offset is >= x.
func (m *GPU) roundFor(x int64) int64 {
	if x <= 0 {
		return 0
	}
	if m.c.Mode == SpinWait {
		return (x + m.poll - 1) / m.poll
	}
	var t, k int64
	iv := m.poll
	for t < x {
		if iv >= m.capIv {
			return k + (x-t+m.capIv-1)/m.capIv
		}
		t += iv
		k++
		iv = min(2*iv, m.capIv)
	}
	return k
}

// interval is the gap between polls of a CTA waiting since w, at cycle now.
func (m *GPU) interval(w int64) int64 {
	if m.c.Mode == SpinWait {
		return m.poll
	}
	k := m.roundFor(m.now - w)
	iv := m.poll
	for j := int64(0); j < k && iv < m.capIv; j++ {
		iv = min(2*iv, m.capIv)
	}
	return iv
}

func (m *GPU) beginCompute(i int) {
	m.advance()
	st := &m.ctas[i]
	st.phase = computing
	st.work = 1
	m.busy = append(m.busy, i)
}

func (m *GPU) finish(i int) {
	st := &m.ctas[i]
	st.phase, st.end, st.work = done, m.now, 0
	m.busyCycles += float64(m.now - st.seen)
	m.lastEnd = max(m.lastEnd, m.now)
	m.busy = remove(m.busy, i)
	m.freeSl = append(m.freeSl, st.slot)
	m.release(m.localKey(i))
	if m.OnDone != nil {
		m.OnDone(i)
	}
	m.launch()
}

// localKey is the waiters key of CTA i's completion; remote signal j uses j.
func (m *GPU) localKey(i int) int { return len(m.arrive) + i }

// release tells the CTAs waiting on key that its flag is set now.
func (m *GPU) release(key int) {
	for _, w := range m.waiters[key] {
		ws := &m.ctas[w]
		ws.unknown--
		ws.times = append(ws.times, m.now)
		if ws.unknown == 0 {
			slices.Sort(ws.times)
			m.resolve(w)
		}
	}
	delete(m.waiters, key)
}

// advance moves every computing CTA's progress up to now at the rates set
// by the last settle.
func (m *GPU) advance() {
	dt := float64(m.now - m.last)
	if dt > 0 {
		for _, i := range m.busy {
			st := &m.ctas[i]
			st.work -= dt / st.cycles
		}
	}
	m.last = m.now
}

func (m *GPU) needSettle() {
	if !m.settled {
		m.settled = true
		m.sk.Settle(m.settle)
	}
}

// settle recomputes the polling traffic and the tile durations once per
// instant, and schedules the next compute completion.
func (m *GPU) settle() {
	m.settled = false
	m.pollRate = 0
	for _, i := range m.spin {
		st := &m.ctas[i]
		for st.cursor < len(st.times) && st.times[st.cursor] <= m.now {
			st.cursor++
		}
		unseen := len(st.times) - st.cursor + st.unknown
		m.pollRate += float64(unseen) * SectorBytes / float64(m.interval(st.start))
	}
	if len(m.busy) == 0 {
		return
	}
	n := float64(len(m.busy))
	// Polling takes its bandwidth first (a read in flight is served); the
	// floor keeps tiles moving under absurd poll rates.
	l2 := math.Max(m.l2BW-m.pollRate, 0.01*m.l2BW) / n
	hbm := m.hbmBW / n
	next := int64(math.MaxInt64)
	for _, i := range m.busy {
		st := &m.ctas[i]
		cost := m.k.CTAs[i].Cost
		cyc := math.Max(cost.ComputeS*m.clock, math.Max((cost.ReadBytes+cost.WriteBytes)/l2, cost.HBMBytes/hbm))
		st.cycles = math.Max(cyc, 1)
		end := m.now + int64(math.Ceil(st.work*st.cycles-1e-9))
		next = min(next, max(end, m.now))
	}
	m.tickGen++
	m.schedule(evTick, -1, m.tickGen, next)
}

// Result reports the finished kernel; times are from the kernel's launch.
func (m *GPU) Result() (*Result, error) {
	if m.next < len(m.ctas) || len(m.busy) > 0 || len(m.ctas) == 0 {
		return nil, fmt.Errorf("eidola: kernel not finished: %d of %d CTAs launched, %d computing", m.next, len(m.ctas), len(m.busy))
	}
	for i := range m.ctas {
		if m.ctas[i].phase != done {
			return nil, fmt.Errorf("eidola: kernel not finished: CTA %d still waits", i)
		}
	}
	r := m.result()
	return r, nil
}

func (m *GPU) result() *Result {
	r := &Result{Cycles: m.lastEnd - m.launchCycle, Events: m.sk.Events()}
	r.KernelTimeS = float64(r.Cycles) / m.clock
	r.CTAs = make([]CTAResult, len(m.ctas))
	var tileSectors float64
	for i, st := range m.ctas {
		r.PollingReads += st.polls
		tileSectors += m.k.CTAs[i].Cost.ReadBytes / SectorBytes
		r.CTAs[i] = CTAResult{
			Kind: m.k.CTAs[i].Kind, Slot: st.slot, Flags: st.flags, Polls: st.polls,
			StartS:   float64(st.start-m.launchCycle) / m.clock,
			WaitS:    float64(st.seen-st.start) / m.clock,
			ComputeS: float64(st.end-st.seen) / m.clock,
			EndS:     float64(st.end-m.launchCycle) / m.clock,
		}
	}
	r.MemoryReads = r.PollingReads + int64(math.Round(tileSectors))
	if slotCycles := float64(m.c.GPU.SMCount*m.c.CTAsPerSM) * float64(r.Cycles); slotCycles > 0 {
		r.SMIdleFraction = 1 - m.busyCycles/slotCycles
	}
	return r
}

func remove(xs []int, x int) []int {
	for i, v := range xs {
		if v == x {
			return append(xs[:i], xs[i+1:]...)
		}
	}
	return xs
}
