package sandbox

import (
	"bufio"
	"io"
	"os"
	"strings"
	"testing"
)

// TestEachStepItsOwnNetwork: a zygote step's network namespace, made
// ahead for a root worker's steps or by the step's own clone, is new for
// every step: never the worker's, never another step's (a step running
// beside one listening on its loopback cannot reach it), with its
// loopback up.
func TestEachStepItsOwnNetwork(t *testing.T) {
	worker, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	s, step := support(t), t.TempDir()
	// A step that listens on its loopback, says where and in which
	// namespace, and runs until its stdin closes.
	const listen = `python3 -c '
import os, socket, sys
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen()
print(os.readlink("/proc/self/ns/net"), l.getsockname()[1], flush=True)
sys.stdin.read()'`
	for i := range 4 {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		tree := startWay(t, s, Request{Spec: Defaults, Argv: []string{"/bin/sh", "-c", listen}, Dir: step, Env: []string{"PATH=/usr/bin:/bin"}, Write: []string{step}},
			Stdio{In: inR, Out: outW, Err: outW})
		line, err := bufio.NewReader(outR).ReadString('\n')
		first, port, _ := strings.Cut(strings.TrimSpace(line), " ")
		if err != nil || !strings.HasPrefix(first, "net:[") || first == worker {
			t.Fatalf("try %d: the listening step said %q (%v); the worker's namespace is %s", i, line, err, worker)
		}
		o := run(t, Defaults, step, `readlink /proc/self/ns/net; python3 -c '
import socket, sys
c = socket.socket(); c.settimeout(2)
print("other", "open" if c.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else "refused")
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(); d = socket.socket()
print("own", "open" if d.connect_ex(l.getsockname()) == 0 else "refused")' `+port)
		inW.Close()
		exit, _ := tree.Wait()
		tree.Finish(exit, "")
		outW.Close()
		if want := "other refused\nown open"; o.exit != 0 || !strings.HasSuffix(strings.TrimSpace(o.out), want) {
			t.Fatalf("try %d: a step beside one listening on port %s said %q, want it to end %q", i, port, o.out, want)
		}
		if second, _, _ := strings.Cut(o.out, "\n"); second == first || second == worker {
			t.Fatalf("try %d: two steps at once shared the network namespace %s (the worker's is %s)", i, first, worker)
		}
	}
	if os.Geteuid() == 0 && zygoteBuilt && way == WayZygote && s.nets.ready == nil {
		t.Fatal("a root worker's zygote steps made their own network namespaces: the pool never started")
	}
}
