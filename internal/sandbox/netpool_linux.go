package sandbox

import (
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// netPool keeps fresh network namespaces ready for a root worker's
// zygote steps: making one is most of what a step's namespaces cost
// (docs/sandbox.md), and here it is made off the step's path, on a thread
// of the worker's that goes back to the host's namespace before anything
// is handed out. Each namespace is new, holds only its loopback (up), and
// is given to one step: what the step's own clone would have made. A
// worker that is not root gives its steps a user namespace of their own,
// which may not enter one made outside it: they make their own.
type netPool struct {
	once  sync.Once
	ready chan *os.File // made, each waiting for one step
	stop  atomic.Bool   // a step could not enter one: none is taken again
}

// netnsRefused is how the zygote says a step's init could not enter the
// namespace made for it (zygote_main_linux.c).
const netnsRefused = "entering its network namespace"

// off stops handing namespaces out: steps make their own from then on.
// What waits is closed; fill ends at its next one.
func (p *netPool) off() {
	p.stop.Store(true)
	for {
		select {
		case f := <-p.ready:
			f.Close()
		default:
			return
		}
	}
}

// netPoolSize is how many namespaces exist made ahead at most: one waits
// in the channel, the next is made and held until there is room. That is
// enough for steps one after another (making one takes about half a
// millisecond); a burst of steps past it makes its own.
const netPoolSize = 2

// take is a namespace made for one step (its descriptor, to send to the
// zygote and close), or nil: the step makes its own.
func (p *netPool) take() *os.File {
	if p.stop.Load() {
		return nil
	}
	p.once.Do(func() {
		if os.Geteuid() == 0 { // else ready stays nil: nothing is made
			p.ready = make(chan *os.File, netPoolSize-1)
			go ownThread(p.fill)
		}
	})
	if p.ready == nil {
		return nil
	}
	select {
	case f := <-p.ready:
		return f
	default:
		return nil
	}
}

// fill makes namespaces as steps take them, on a thread of its own
// (ownThread: never the main one, and ended with fill where it could not
// go back); the first failure ends it (the steps make their own from then
// on).
func (p *netPool) fill() {
	host, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return
	}
	defer host.Close()
	for !p.stop.Load() {
		f, err := freshNet(host)
		if err != nil {
			return
		}
		p.ready <- f
	}
}

// freshNet makes a network namespace with its loopback up and returns to
// host's; an error leaves the thread where it is only when it could not
// return (fill then ends, and its locked thread with it).
func freshNet(host *os.File) (*os.File, error) {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return nil, err
	}
	var f *os.File
	err := loopbackUp()
	if err == nil {
		f, err = os.Open("/proc/thread-self/ns/net")
	}
	if serr := unix.Setns(int(host.Fd()), unix.CLONE_NEWNET); serr != nil {
		if f != nil {
			f.Close()
		}
		return nil, serr
	}
	return f, err
}

// loopbackUp brings up the loopback of this thread's namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
