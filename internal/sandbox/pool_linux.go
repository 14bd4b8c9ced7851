package sandbox

import (
	"strconv"
	"sync"
	"time"
)

// cgroupPool keeps the empty cgroups of finished steps with their forker:
// creating and removing three cgroup v1 folders costs a step ~3 ms, and
// joining them an RCU grace period; reusing them a few writes.
type cgroupPool struct {
	mu     sync.Mutex
	idle   []*cgroup
	closed bool
	// releasing counts the finished trees whose cgroups are not back yet.
	releasing sync.WaitGroup
}

// release gives a finished tree's cgroups back to the pool once they are
// empty, or removes them when something is still left in them after
// releaseWait (in the background, off the step's path). They are seldom
// empty at once: bubblewrap exits with its tool's status while the
// sandbox's init is still tearing its namespaces down (about a
// millisecond here), and a step that waited for that, or made new
// cgroups and a new forker instead (an RCU grace period to move its
// thread), paid 2-3 ms (docs/performance.md#confinement-issue-21).
func (s *Support) release(cg *cgroup) {
	if cg == nil {
		return
	}
	if onRelease != nil {
		onRelease(cg)
	}
	if cg.empty() {
		s.pool.put(cg)
		return
	}
	s.pool.releasing.Add(1)
	go func() {
		defer s.pool.releasing.Done()
		for wait := time.Millisecond; wait <= releaseWait; wait *= 2 {
			time.Sleep(wait)
			if cg.empty() {
				s.pool.put(cg)
				return
			}
		}
		cg.remove()
	}()
}

// onRelease, set by a test, sees each set as it is given back.
var onRelease func(*cgroup)

// releaseWait is how long a finished tree's cgroups may take to empty
// before they are removed with what is left in them (the backoff's last
// sleep: about twice that in all).
const releaseWait = 512 * time.Millisecond

// poolMax bounds the idle sets the pool keeps (each three folders and a
// thread): as many as steps ran at once, up to this.
const poolMax = 64

// put keeps cg for the next tree, or removes it when the pool is full or
// closed.
func (p *cgroupPool) put(cg *cgroup) {
	charged := cg.charged()
	p.mu.Lock()
	keep := !p.closed && len(p.idle) < poolMax && !charged
	if keep {
		p.idle = append(p.idle, cg)
	}
	p.mu.Unlock()
	if !keep {
		cg.remove()
	}
}

// chargedMax and kernelMax are what a set may still be charged with and
// be pooled: a tree's files in a write folder on a tmpfs stay charged to
// the set that wrote them, their pages and their inodes alike, and the
// next tree in it would start with them against its own limit (found
// attacking: 58 MiB of 64 in files, and 33,000 empty ones, each failed
// the next tree). Page cache is reclaimed, a tmpfs's pages are not;
// kernel memory may be either, so more of it is let through (a tree that
// read many files leaves their cached names). Removed, a set's charge
// goes to its parent.
const (
	chargedMax = 1 << 20
	kernelMax  = 8 << 20
)

// charged reports whether cg holds more than chargedMax of a tmpfs's
// pages (memory.stat's shmem) or kernelMax of kernel memory.
func (cg *cgroup) charged() bool {
	if !cg.has("memory") {
		return false
	}
	kernel, _ := strconv.ParseInt(cg.read("memory", "memory.kmem.usage_in_bytes"), 10, 64)
	return field(cg.read("memory", "memory.stat"), "shmem") > chargedMax || kernel > kernelMax
}

// Settle waits until every finished tree is put away: its mount
// namespace dropped and its cgroups back (Finish does both off the
// step's path). A measurement settles between the steps it times, so no
// step pays for the one before.
func (s *Support) Settle() { s.pool.releasing.Wait() }

// Drain removes the pooled cgroups once the trees being released are
// back, and keeps none from then on: a worker calls it as it stops
// (sweepStale would find them at the next start, but not where the pid
// it reads in their names was reused).
func (s *Support) Drain() {
	s.pool.releasing.Wait()
	s.pool.mu.Lock()
	idle := s.pool.idle
	s.pool.idle, s.pool.closed = nil, true
	s.pool.mu.Unlock()
	for _, cg := range idle {
		cg.remove()
	}
}
