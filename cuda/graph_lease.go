package cuda

import (
	"errors"
	"sync"

	"github.com/gocuda/gocuda/resource"
)

// Graph leases: what keeps the memory, modules, events and host functions that a
// graph's operations name from being freed while a Graph or an Exec may replay them
// (see graph.go). leaseState counts the leases on one object and postpones its
// release to the end of the last; a leaseSet is the leases of one Graph or Exec.

// leased is memory a capture used, and whether any of its uses wrote it.
type leased struct {
	m     *memBase
	write bool
}

// leaseState counts the leases on an allocation or a module and keeps its release
// while there are any.
type leaseState struct {
	mu       sync.Mutex
	n        int
	pending  func() error // the postponed release
	blocking bool         // pending may wait for the GPU
}

// add adds a lease; the caller holds the object (it is not released).
func (ls *leaseState) add() {
	ls.mu.Lock()
	ls.n++
	ls.mu.Unlock()
}

// postpone keeps release (of the blocking class if blocking) for the end of the last
// lease and reports true, if there are leases.
func (ls *leaseState) postpone(release func() error, blocking bool) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.n == 0 {
		return false
	}
	ls.pending, ls.blocking = release, blocking
	return true
}

// end ends a lease. When it was the last, the postponed release runs: a
// non-blocking one now, a blocking one (which may wait for the GPU) through a
// registration of its own, dropped at once, so that it runs in resource.Reclaim as
// that class does.
func (ls *leaseState) end() error {
	ls.mu.Lock()
	ls.n--
	var release func() error
	if ls.n == 0 {
		release, ls.pending = ls.pending, nil
	}
	blocking := ls.blocking
	ls.mu.Unlock()
	switch {
	case release == nil:
		return nil
	case blocking:
		resource.ResourceFinalizer(func(p *postponed) error { return p.release() }, &postponed{release}, true,
			resource.Kind("postponed release"))
		return nil
	}
	return release()
}

// addLease adds a lease on m, an allocation held by the caller (it is not freed).
func (m *memBase) addLease() {
	ls := m.lease.Load()
	if ls == nil {
		m.lease.CompareAndSwap(nil, new(leaseState))
		ls = m.lease.Load()
	}
	ls.add()
}

// postpone is called first by m's release, free (of the blocking class if
// blocking): it shuts m's hold, waiting for the operations queuing work on it (one
// of which may be leasing it), and then, if m is leased, keeps free for the end of
// the last lease and reports true.
func (m *memBase) postpone(free func() error, blocking bool) bool {
	m.hold.close()
	ls := m.lease.Load()
	return ls != nil && ls.postpone(free, blocking)
}

// endLease ends a lease on m.
func (m *memBase) endLease() error { return m.lease.Load().end() }

// postponed carries a blocking release past the end of the last lease.
type postponed struct{ release func() error }

// leaseSet is the leases of one Graph or Exec (or of a capture in progress, not
// registered). A registered set ends them through its own release registration: at
// Close, or, once unreachable, in the non-blocking lane (the postponed releases are
// stream-ordered frees and event destroys, which do not wait for the GPU, or go to
// Reclaim).
type leaseSet struct {
	items  []leased
	index  map[*memBase]int // items by memory, once add is used
	mods   []*Module
	events []*event
	fns    map[*hostFunc]int // host node functions, by how many nodes call them
	reg    *resource.Registration
	raw    []rawUse // the stream checker's raw addresses of kernel nodes (streamcheck.go)
}

// addHost leases hf to ls for n more nodes.
func (ls *leaseSet) addHost(hf *hostFunc, n int) {
	if ls.fns == nil {
		ls.fns = map[*hostFunc]int{}
	}
	if ls.fns[hf] == 0 {
		hf.update(1, 0)
	}
	ls.fns[hf] += n
}

// queueHost counts the calls a launch of ls's graph queues (n = 1), or takes them
// back when the launch failed (n = -1).
func (ls *leaseSet) queueHost(n int) {
	for hf, k := range ls.fns {
		hf.update(0, n*k)
	}
}

// add leases m (an allocation held by the caller) to ls, unless ls has it already
// (then a write is remembered).
func (ls *leaseSet) add(m *memBase, write bool) {
	if ls.index == nil {
		ls.index = make(map[*memBase]int, len(ls.items))
		for i, l := range ls.items {
			ls.index[l.m] = i
		}
	}
	if i, ok := ls.index[m]; ok {
		ls.items[i].write = ls.items[i].write || write
		return
	}
	m.addLease()
	ls.index[m] = len(ls.items)
	ls.items = append(ls.items, leased{m, write})
}

// addModule leases m (held open by the caller) to ls, unless ls has it already.
func (ls *leaseSet) addModule(m *Module) { addOnce(&ls.mods, m, &m.lease) }

// addEvent leases e (held by the caller) to ls, unless ls has it already.
func (ls *leaseSet) addEvent(e *event) { addOnce(&ls.events, e, &e.lease) }

// addOnce appends x to *list and adds a lease on it, unless the list has it.
func addOnce[T comparable](list *[]T, x T, lease *leaseState) {
	for _, y := range *list {
		if y == x {
			return
		}
	}
	lease.add()
	*list = append(*list, x)
}

// merge leases to ls what o leases (o's own leases are untouched).
func (ls *leaseSet) merge(o *leaseSet) {
	for _, l := range o.items {
		ls.add(l.m, l.write)
	}
	for _, m := range o.mods {
		ls.addModule(m)
	}
	for _, e := range o.events {
		ls.addEvent(e)
	}
	for hf, n := range o.fns {
		ls.addHost(hf, n)
	}
	ls.raw = append(ls.raw, o.raw...)
}

// register makes a registered set of what ls leases, taking its leases over.
func (ls *leaseSet) register() *leaseSet {
	out := &leaseSet{items: ls.items, index: ls.index, mods: ls.mods, events: ls.events, fns: ls.fns, raw: ls.raw}
	out.reg = resource.ResourceFinalizer((*leaseSet).end, out, false, resource.Kind("graph lease"))
	return out
}

// clone returns a registered set with leases of its own on what ls leases (which
// the caller holds: ls's leases keep it all).
func (ls *leaseSet) clone() *leaseSet {
	var out leaseSet
	out.merge(ls)
	return out.register()
}

// end ends every lease of ls.
func (ls *leaseSet) end() error {
	var errs []error
	for _, l := range ls.items {
		if err := l.m.endLease(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, m := range ls.mods {
		if err := m.lease.end(); err != nil {
			errs = append(errs, err)
		}
	}
	for _, e := range ls.events {
		if err := e.lease.end(); err != nil {
			errs = append(errs, err)
		}
	}
	for hf := range ls.fns {
		hf.update(-1, 0)
	}
	ls.items, ls.index, ls.mods, ls.events, ls.fns = nil, nil, nil, nil, nil
	return errors.Join(errs...)
}
