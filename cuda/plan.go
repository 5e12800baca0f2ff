package cuda

// The planner: what an operation does to its memory, written once.
//
// Every operation that queues work on memory — a kernel launch, a batch or a graph
// launch, Enqueue's call into another library, a copy or memset — takes the same
// steps, through an opPlan:
//
//   - hold (or add, for memory the caller holds): each operand once, checked (nil,
//     closed, another context) and kept from being freed; a memory named twice is
//     one operand, written if either use writes;
//   - plan: the uses on other streams that the work must wait for (memBase.plan),
//     and each operand's plan for the record;
//   - handOff: those waits, on the device (a launch fuses up to maxFused of them
//     with itself in one call into C: launchAfter);
//   - record, once the work is queued: each operand's use on the stream;
//   - release: the holds.
//
// The usual operation skips all of it: under the stream's read lock, when every
// operand passes fastOn (an open allocation of the operation's context whose one
// use is on the stream), the work is queued with nothing held, waited for or
// recorded. Launch and Enqueue test that one rule before they build a plan.

// operand is one memory of an operation.
type operand struct {
	m     *memBase
	write bool
	held  bool // the plan holds m (hold), and release ends it
	p     planned
}

// opPlan is an operation's operands and their plans, on the caller's stack for the
// first few.
type opPlan struct {
	n      int
	inline [4]operand
	more   []operand
	wait   deps // the uses to wait for, after plan
}

func (p *opPlan) at(i int) *operand {
	if i < len(p.inline) {
		return &p.inline[i]
	}
	return &p.more[i-len(p.inline)]
}

// merge marks m written if write, when m is an operand already, and reports
// whether it was.
func (p *opPlan) merge(m *memBase, write bool) bool {
	for i := range p.n {
		if o := p.at(i); o.m == m {
			o.write = o.write || write
			return true
		}
	}
	return false
}

func (p *opPlan) push(o operand) {
	if p.n < len(p.inline) {
		p.inline[p.n] = o
	} else {
		p.more = append(p.more, o)
	}
	p.n++
}

// add makes m, which the caller holds, an operand written if write.
func (p *opPlan) add(m *memBase, write bool) {
	if !p.merge(m, write) {
		p.push(operand{m: m, write: write})
	}
}

// hold makes m an operand written if write and holds it until release: m must be
// memory of context c (any, with c nil) that is not closed. It fails with
// errNilMemory, the context's error, errWrongContext or ErrClosed, holding nothing
// more.
func (p *opPlan) hold(m *memBase, write bool, c *ctxState) error {
	if err := m.check(); err != nil {
		return err
	}
	if c != nil && m.ctx.ctxState != c {
		return errWrongContext
	}
	if p.merge(m, write) {
		return nil
	}
	if err := m.acquire(); err != nil {
		return err
	}
	p.push(operand{m: m, write: write, held: true})
	return nil
}

// each calls f with each operand's memory and whether the operation writes it.
func (p *opPlan) each(f func(m *memBase, write bool)) {
	for i := range p.n {
		o := p.at(i)
		f(o.m, o.write)
	}
}

// plan plans each operand's use on t, adding the uses to wait for to p.wait.
func (p *opPlan) plan(t *stream) {
	for i := range p.n {
		o := p.at(i)
		o.p = o.m.plan(t, o.write, &p.wait)
	}
}

// handOff makes work queued on t from now on wait, on the device, for the uses that
// plan found (each through its own context's events: a copy between devices has
// operands of two), and forgets them.
func (p *opPlan) handOff(t *stream) error {
	var err error
	for i := range p.wait.n {
		u := *p.wait.at(i)
		if err = u.s.cs.mem.Load().orderAfter(u, t); err != nil {
			break
		}
	}
	p.wait = deps{}
	if err != nil {
		return errHandOff(err)
	}
	return nil
}

// record records each operand's use on t, once the work is queued there.
func (p *opPlan) record(t *stream) {
	for i := range p.n {
		o := p.at(i)
		o.m.record(t, o.write, o.p)
	}
}

// release ends the plan's holds.
func (p *opPlan) release() {
	for i := range p.n {
		if o := p.at(i); o.held {
			o.held = false
			o.m.leave()
		}
	}
}

// fastOn is the usual operation's rule: m is an open allocation (not a view) of
// context c whose one use is on t, a write if write, so that work on t may use it
// without a plan (memBase.fastUse says why holding it is not needed either). The
// caller holds t's read lock.
func (m *memBase) fastOn(c *ctxState, t *stream, write bool) bool {
	return m != nil && m.ctx != nil && m.root == nil && m.ctx.ctxState == c && m.fastUse(t, write)
}

// planless reports whether work on t may take the usual operation's path at all:
// not while t captures (captured memory is leased, not used) nor while the stream
// checker runs (it sees the uses that the plan records).
func (t *stream) planless() bool {
	return t.capture.Load() == nil && !streamCheck.on.Load()
}
