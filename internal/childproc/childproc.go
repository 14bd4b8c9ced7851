// Package childproc evaluates what a plan brings (a jq query, a template)
// in child processes whose address space the kernel caps, so one
// evaluation cannot take its host's memory or outlive its time: one
// allocation past the cap fails the child, never the worker, and a child
// still busy when its caller gives up is killed. A child is this same
// executable started under another argv[0] (Kind.Enter, called from an
// init: moby's reexec pattern), so the test binaries, the CLI and the
// worker all carry it and nothing extra is installed. Children are kept in
// a small pool per memory budget and answer one request at a time.
package childproc

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMemory is a child's memory budget when the caller gives none: its
// Go heap limit. Its address space may exceed that by the same amount
// again plus 64 MiB (the runtime's own mappings, fragmentation, thread
// stacks) before the kernel refuses.
const DefaultMemory = 256 << 20

// Errors an exchange ends with besides the caller's context's.
var (
	ErrMemory      = errors.New("needs more memory than its budget")
	ErrTooLarge    = errors.New("answer too large")
	ErrChildFailed = errors.New("evaluator exited")
	// ErrBusy wraps the context's error when it ended before any child
	// was free to take the request.
	ErrBusy = errors.New("every evaluator was busy")
)

// Kind is one kind of child: the argv[0] that makes this executable one,
// its pool of idle children per memory budget, and the slots that bound
// how many work at once.
type Kind struct {
	name      string
	maxAnswer uint64
	slots     chan struct{}
	mu        sync.Mutex
	idle      map[int64][]*child
	warming   atomic.Bool
}

// slots bound how many children of every kind work at once: two a core,
// whatever the callers' concurrency (a worker's hundreds of steps would
// otherwise start a child each, each with its own budget of memory).
var slots = make(chan struct{}, max(2, 2*runtime.GOMAXPROCS(0)))

// New is a kind of child started as name, whose answers are at most
// maxAnswer bytes (a longer one is ErrTooLarge).
func New(name string, maxAnswer uint64) *Kind {
	return &Kind{name: name, maxAnswer: maxAnswer, idle: map[int64][]*child{}, slots: slots}
}

// Enter makes this process a child of k and never returns when it was
// started as one: it answers each request with handle until its parent
// is gone. Call it from an init, before the program's own code runs.
func (k *Kind) Enter(handle func(req []byte) []byte) {
	if filepath.Base(os.Args[0]) == k.name {
		os.Exit(serve(os.Args[1:], os.Stdin, os.Stdout, handle))
	}
}

// Ask sends req to a child of this budget (DefaultMemory when 0) once one
// may work (other requests wait their turn, their time not yet counted),
// and returns its answer within limit; a request larger than the budget
// is ErrMemory. When ctx ends or limit passes first, the child is killed
// and the error is ctx's (context.DeadlineExceeded for limit). A reused
// child that fails other than for memory (one that died while it waited
// idle: the OOM killer, say) gets the request once more, in a fresh one.
func (k *Kind) Ask(ctx context.Context, memory int64, req []byte, limit time.Duration) ([]byte, error) {
	memory = budget(memory)
	if int64(len(req)) > memory {
		// The child would refuse it: the request alone passes its budget.
		return nil, ErrMemory
	}
	select {
	case k.slots <- struct{}{}:
		defer func() { <-k.slots }()
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: %w", ErrBusy, context.Cause(ctx))
	}
	if ctx.Err() != nil { // ended as the slot came free: select chose at random
		return nil, fmt.Errorf("%w: %w", ErrBusy, context.Cause(ctx))
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for try := 0; ; try++ {
		c, reused, err := k.get(memory)
		if err != nil {
			return nil, err
		}
		b, err := c.do(ctx, req, k.maxAnswer)
		if err == nil {
			k.put(memory, c)
			return b, nil
		}
		c.kill()
		if !reused || try > 0 || ctx.Err() != nil || !errors.Is(err, ErrChildFailed) {
			return nil, err
		}
	}
}

// Warm makes sure an idle child with this budget is waiting, so the next
// request does not pay for starting one.
func (k *Kind) Warm(memory int64) error {
	memory = budget(memory)
	c, reused, err := k.get(memory)
	if err != nil {
		return err
	}
	if !reused {
		// A new child answers its first frame once its runtime is up; an
		// empty frame is answered without the handler.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := c.do(ctx, nil, k.maxAnswer); err != nil {
			c.kill()
			return err
		}
	}
	k.put(memory, c)
	return nil
}

// Ready reports whether an idle child of this budget waits and may work
// now; when none waits, one is started in the background (Warm) and Ready
// answers false: a caller that must not wait (an inline step) goes
// another way meanwhile.
func (k *Kind) Ready(memory int64) bool {
	memory = budget(memory)
	k.mu.Lock()
	idle := len(k.idle[memory]) > 0
	k.mu.Unlock()
	if idle && len(k.slots) == cap(k.slots) {
		return false
	}
	if !idle && k.warming.CompareAndSwap(false, true) {
		go func() {
			defer k.warming.Store(false)
			_ = k.Warm(memory)
		}()
	}
	return idle
}

func budget(memory int64) int64 {
	if memory <= 0 {
		return DefaultMemory
	}
	return memory
}

// get hands out an idle child (reused) or a new one.
func (k *Kind) get(memory int64) (c *child, reused bool, err error) {
	k.mu.Lock()
	if cs := k.idle[memory]; len(cs) > 0 {
		c := cs[len(cs)-1]
		k.idle[memory] = cs[:len(cs)-1]
		k.mu.Unlock()
		return c, true, nil
	}
	k.mu.Unlock()
	c, err = start(k.name, memory)
	return c, false, err
}

// put keeps c idle: as many idle children per budget as may work at once,
// so that a steady load starts none.
func (k *Kind) put(memory int64, c *child) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.idle[memory]) >= cap(k.slots) {
		c.kill()
		return
	}
	k.idle[memory] = append(k.idle[memory], c)
}

// serve is a child's life: cap the address space, then answer requests
// read from in, one at a time, until in closes (its parent is gone).
func serve(args []string, in io.Reader, out io.Writer, handle func([]byte) []byte) int {
	memory := int64(DefaultMemory)
	if len(args) > 0 {
		if n, err := strconv.ParseInt(args[0], 10, 64); err == nil && n > 0 {
			memory = n
		}
	}
	// The heap limit makes the collector work before the hard cap is
	// near; the cap is what holds when one allocation would pass it.
	debug.SetMemoryLimit(memory)
	debug.SetMaxStack(64 << 20)
	if err := capAddressSpace(uint64(2*memory) + 64<<20); err != nil {
		return 3
	}
	// Below the worker: a child spinning on a plan's loop slowed the
	// workflow tasks beside it threefold (found attacking issue 57).
	lowerPriority()
	r := bufio.NewReader(in)
	w := bufio.NewWriter(out)
	for {
		req, err := readFrame(r, uint64(memory))
		if err != nil {
			return 0
		}
		var answer []byte
		if len(req) > 0 {
			answer = handle(req)
		}
		if writeFrame(w, answer) != nil || w.Flush() != nil {
			return 0
		}
		// What the request started and left ending (a timer's, a
		// watcher's goroutine) ends now: on one thread a child answering
		// request after request never yields, and they piled up by the
		// thousand.
		runtime.Gosched()
		// An idle child gives back what a large request took.
		if heapBytes() > 16<<20 {
			debug.FreeOSMemory()
		}
	}
}

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

func writeFrame(w io.Writer, b []byte) error {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// readFrame reads one frame; a frame over max is ErrTooLarge (the rest
// of the stream is then unusable).
func readFrame(r io.Reader, max uint64) ([]byte, error) {
	var n [8]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint64(n[:])
	if size > max {
		return nil, ErrTooLarge
	}
	b := make([]byte, size)
	_, err := io.ReadFull(r, b)
	return b, err
}

// errorf wraps ErrChildFailed with what the child said.
func errorf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrChildFailed}, a...)...)
}
