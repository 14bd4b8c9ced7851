package toolrun

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/syncbuf"
)

const head = `{"toolId":"t","success":true,"exitCode":0,"message":"m","timestamp":"2026-01-01T00:00:00Z","feedback":[],"data":`

// The envelope a tool's stdout ends with is found after its logs, braces
// and quotes in its strings (escaped or not) aside; anything else is no
// envelope.
func TestLastJSONObject(t *testing.T) {
	env := head + `{"s":"a } { \" \\\\\" }","n":[{"x":{}}]}}`
	for _, c := range []struct {
		name, out, want string
	}{
		{"alone", env, env},
		{"after logs with braces", "starting {\n} \"quoted\n" + env + "\n\n", env},
		{"after another object", `{"toolId":"old"}` + "\n" + env, env},
		{"a string ending in a backslash", head + `"\\"}`, head + `"\\"}`},
		{"logs after it", env + "\ndone", ""},
		{"an object without toolId", `{"a":{"toolId":1}}`, ""},
		{"unbalanced", `}` + env[1:], ""},
		{"an open string", `{"toolId":"t}`, ""},
		{"braces only", "}}}", ""},
		{"nothing", "", ""},
	} {
		if got := string(lastJSONObject([]byte(c.out))); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// Finding an envelope costs one pass over it, however many objects its
// data holds or however deep: trying each '{' back from the end decoded
// every object inside it (416 KiB nested 2,000 deep took 3.8 s of the
// worker's CPU, 8 MiB of small objects 1.2 GB), outside any budget.
func TestFindingAnEnvelopeIsOnePass(t *testing.T) {
	var deep, wide strings.Builder
	deep.WriteString(head)
	for range 2000 {
		deep.WriteString(`{"p":"` + strings.Repeat("x", 200) + `","a":`)
	}
	deep.WriteString("1" + strings.Repeat("}", 2000) + "}")
	wide.WriteString(head + "[")
	for range 100000 {
		wide.WriteString(`{"a":[1],"b":{}},`)
	}
	wide.WriteString("0]}")
	for name, out := range map[string][]byte{"deep": []byte(deep.String()), "wide": []byte(wide.String())} {
		var found []byte
		// Decoding from each '{' made a decoder each: 100,000 here.
		allocs := testing.AllocsPerRun(1, func() { found = lastJSONObject(out) })
		if len(found) != len(out) || allocs > 200 {
			t.Errorf("%s: found %d of %d bytes, %.0f allocations", name, len(found), len(out), allocs)
		}
	}
}

// A tool's numbers reach the step as float64, as JSON decodes them
// everywhere else, and one past float64 is refused by its pointer.
func TestEnvelopeNumbers(t *testing.T) {
	env, err := decodeEnvelope([]byte(head + `{"a":[1,2.5,{"b":-3e2}],"c":"1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(env.Data)
	d := env.Data.(map[string]any)
	if string(got) != `{"a":[1,2.5,{"b":-300}],"c":"1"}` || d["a"].([]any)[0] != float64(1) {
		t.Fatalf("%s %#v", got, d)
	}
	if _, err := decodeEnvelope([]byte(head + `{"a":[1,{"b":1e400}]}}`)); err == nil || !strings.Contains(err.Error(), "data /a/1/b") {
		t.Fatalf("a number past float64: %v", err)
	}
}

// lastJSONObjectByEachBrace is how the envelope was found before: a decode
// from each '{' back from the end. The one pass must find the same.
func lastJSONObjectByEachBrace(b []byte) []byte {
	b = bytes.TrimSpace(b)
	for end := len(b); end > 0; {
		i := bytes.LastIndexByte(b[:end], '{')
		if i < 0 {
			return nil
		}
		dec := json.NewDecoder(bytes.NewReader(b[i:]))
		var v map[string]json.RawMessage
		if err := dec.Decode(&v); err == nil && int(dec.InputOffset()) == len(b)-i {
			if _, ok := v["toolId"]; ok {
				return b[i:]
			}
		}
		end = i
	}
	return nil
}

func FuzzLastJSONObject(f *testing.F) {
	for _, s := range []string{head + `{"s":"a } { \" \\\\\" }"}}`, `x{"toolId":"\\"}`, `{"toolId":"}"}`, `"{"toolId":1}`, `{"a":"\"{\"toolId\":1}"}`,
		`{"toolId":"t"}}`, `{{"toolId":"t"}`, `\"{"toolId":"t"}`, "{\"toolId\":\"t\",\"d\":[\"]\",{}]}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := lastJSONObject(b), lastJSONObjectByEachBrace(b); !bytes.Equal(got, want) {
			t.Fatalf("%q: found %q, decoding from each brace found %q", b, got, want)
		}
	})
}

// A step's log keeps MaxLogFile bytes and says how many more came: the
// worker writes it, outside the tool's own limits (256 MiB of stderr went
// to disk in 0.7 s, found attacking issue 57).
func TestLogFileIsBounded(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StderrLog)
	l := newLogFile(openTestDir(t, dir), StderrLog)
	line := []byte(strings.Repeat("x", 1<<20-1) + "\n")
	for range MaxLogFile>>20 + 3 {
		if n, err := l.Write(line); n != len(line) || err != nil {
			t.Fatal(n, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	b, _ := os.ReadFile(path)
	want := fmt.Sprintf("[capflow: stderr.log stopped at 64 MiB; %d bytes more were not kept]\n", 3<<20)
	if err != nil || st.Size() != MaxLogFile+int64(len(want)) || !strings.HasSuffix(string(b), "x\n"+want) {
		t.Fatalf("%v: %d bytes, ending %q", err, st.Size(), b[max(0, len(b)-100):])
	}
	// Once past it, a short line that would still fit is not kept either
	// (a gap would read as whole); a first write past it leaves the count.
	gapDir, firstDir := t.TempDir(), t.TempDir()
	gap := newLogFile(openTestDir(t, gapDir), StdoutLog)
	gap.Write(make([]byte, MaxLogFile-10))
	gap.Write(make([]byte, 100))
	gap.Write([]byte("late\n"))
	gap.Close()
	first := newLogFile(openTestDir(t, firstDir), StdoutLog)
	first.Write(make([]byte, MaxLogFile+1))
	first.Close()
	g, _ := os.ReadFile(filepath.Join(gapDir, StdoutLog))
	f, _ := os.ReadFile(filepath.Join(firstDir, StdoutLog))
	if bytes.Contains(g, []byte("late")) || !bytes.HasSuffix(g, []byte("105 bytes more were not kept]\n")) || string(f) != fmt.Sprintf("[capflow: stdout.log stopped at 64 MiB; %d bytes more were not kept]\n", MaxLogFile+1) {
		t.Fatalf("after a drop: %q; a first write past the bound: %q", g[max(0, len(g)-80):], f)
	}
}

// openTestDir is dir's handle, closed when the test ends.
func openTestDir(t *testing.T, dir string) *os.File {
	t.Helper()
	f, err := openDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// The output file is read from the handle it was checked on, beneath the
// step folder's handle: a FIFO, a link (to a file or a device), a folder or
// a socket is refused, never read or waited on, and a folder swapped in for
// the step folder's path after its handle was taken is not read.
func TestOutputFileIsCheckedOnItsHandle(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "real.json")
	if err := os.WriteFile(target, []byte(head+"1}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		make func(string) error
		want string
	}{
		{"a FIFO", func(p string) error { return syscall.Mkfifo(p, 0o600) }, "not a regular file (p---------)"},
		{"a link to a file", func(p string) error { return os.Symlink(target, p) }, "not a regular file (a symbolic link)"},
		{"a link to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }, "not a regular file (a symbolic link)"},
		{"a folder", func(p string) error { return os.Mkdir(p, 0o700) }, "not a regular file (d---------)"},
		{"a socket", func(p string) error { _, err := net.Listen("unix", p); return err }, "not a regular file (a socket or a device)"},
	} {
		step := t.TempDir()
		if err := c.make(filepath.Join(step, OutputFile)); err != nil {
			t.Fatal(err)
		}
		if b, _, _, err := readResult(openTestDir(t, step), nil, 1<<20); b != nil || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q, %v", c.name, b, err)
		}
	}
	step := t.TempDir()
	if err := os.WriteFile(filepath.Join(step, OutputFile), []byte(head+"1}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b, src, _, err := readResult(openTestDir(t, step), nil, 1<<20); string(b) != head+"1}" || src != OutputFile || err != nil {
		t.Errorf("a regular file: %q %s %v", b, src, err)
	}
	// The step folder's path now names another folder, with its own
	// output file: the result is still the one beneath the handle.
	h := openTestDir(t, step)
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, OutputFile), []byte(head+"2}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(step, step+".was"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, step); err != nil {
		t.Fatal(err)
	}
	if b, _, _, err := readResult(h, nil, 1<<20); string(b) != head+"1}" || err != nil {
		t.Errorf("after the step folder was swapped: %q %v", b, err)
	}
}

// Every field of a tool's envelope that reaches history is bounded: a
// phase, a severity or a cause of megabytes passed every bound and made a
// result Temporal refuses; bad entries are said ten at a time, each value
// quoted in part (found attacking issue 57).
func TestEveryFieldIsBounded(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("Z", 16<<10) // the test's runner keeps 64 KiB
	fields := `"toolId":"t","exitCode":1,"success":false,"timestamp":"2026-11-21T10:00:00Z","message":"no",` +
		`"feedback":[{"phase":"` + big + `","level":"error","message":"m","timestamp":"2026-11-21T10:00:00Z"}],` +
		`"error":{"code":"DEPENDENCY_UNAVAILABLE","severity":"` + big + `","cause":"` + big + `"}`
	m := script(t, "cat > \"$CAPFLOW_OUTPUT_PATH\" <<'EOF2'\n{"+fields+"}\nEOF2\nexit 1\n")
	m.OutputSchema = nil
	env := run(t, m, nil, 20*time.Second)
	bounded, _ := envelope.Bounded(env, "")
	if env.Error == nil || env.Error.Code != caperr.DependencyUnavailable || env.Error.Severity != caperr.Lookup(caperr.DependencyUnavailable).Severity ||
		env.Error.Cause != "" || envelope.Size(&bounded) > 4<<10 {
		t.Fatalf("%+v, %d bytes bounded", env.Error, envelope.Size(&bounded))
	}
	var entries []string
	for range 30 {
		entries = append(entries, `{"phase":"p","level":"`+big+`","message":"m","timestamp":"2026-11-21T10:00:00Z"}`)
	}
	bad := `{"toolId":"t","exitCode":0,"success":true,"timestamp":"2026-11-21T10:00:00Z","message":"ok","feedback":[` + strings.Join(entries, ",") + `]}`
	if _, err := decodeEnvelope([]byte(bad)); err == nil || len(err.Error()) > 2<<10 || !strings.HasSuffix(err.Error(), "and more") {
		t.Fatalf("%d bytes: %.300v", len(fmt.Sprint(err)), err)
	}
}

// stderr reaches its log a buffer at a time, and whole: 8 MiB of empty
// lines were as many writes (10 s of the worker's CPU).
func TestStderrIsLoggedInBuffers(t *testing.T) {
	lines := strings.Repeat("\n", 1<<20) + "last\n"
	var log writes
	readStderr(strings.NewReader(lines), &log, nil, &tailBuffer{max: 1024}, func(envelope.Feedback) {}, nil, hclog.NewNullLogger())
	if log.n > 40 || log.b.String() != lines {
		t.Fatalf("%d writes of %d bytes", log.n, log.b.Len())
	}
}

type writes struct {
	n int
	b bytes.Buffer
}

func (w *writes) Write(p []byte) (int, error) { w.n++; return w.b.Write(p) }

// A tool that pauses in the middle of a line (a progress bar) has the
// lines before it in its log by then.
func TestStderrIsFlushedWhenTheToolPauses(t *testing.T) {
	r, w := io.Pipe()
	log := &syncbuf.Buffer{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		readStderr(r, log, nil, &tailBuffer{max: 1024}, func(envelope.Feedback) {}, nil, hclog.NewNullLogger())
	}()
	w.Write([]byte("one\ntwo\n50%"))
	for deadline := time.Now().Add(10 * time.Second); log.String() != "one\ntwo\n" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	got := log.String()
	w.Write([]byte(" 100%\n"))
	w.Close()
	<-done
	if got != "one\ntwo\n" || log.String() != "one\ntwo\n50% 100%\n" {
		t.Fatalf("while paused %q, at the end %q", got, log.String())
	}
}

// The masked rewrite of the output file writes only the file that was
// read, and only while no other name holds it: a hard link carried the
// write into another file, and a FIFO swapped in after the read held the
// worker (an attack on this round's change).
func TestTheMaskedRewriteWritesOnlyWhatWasRead(t *testing.T) {
	setup := func(t *testing.T) (string, *os.File, *os.File) {
		step := t.TempDir()
		if err := os.WriteFile(filepath.Join(step, OutputFile), []byte(head+"1}"), 0o600); err != nil {
			t.Fatal(err)
		}
		h, err := os.Open(step)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.Close() })
		_, _, read, err := readResult(h, nil, 1<<20)
		if err != nil || read == nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { read.Close() })
		return step, h, read
	}
	t.Run("its own file", func(t *testing.T) {
		step, h, read := setup(t)
		rewriteOutput(h, read, []byte("masked"))
		if b, _ := os.ReadFile(filepath.Join(step, OutputFile)); string(b) != "masked" {
			t.Fatalf("%q", b)
		}
	})
	t.Run("a hard link elsewhere", func(t *testing.T) {
		step, h, read := setup(t)
		other := filepath.Join(t.TempDir(), "worker.env")
		if err := os.Link(filepath.Join(step, OutputFile), other); err != nil {
			t.Fatal(err)
		}
		rewriteOutput(h, read, []byte("masked"))
		if b, _ := os.ReadFile(other); string(b) != head+"1}" {
			t.Fatalf("the linked file became %q", b)
		}
	})
	t.Run("another file swapped in", func(t *testing.T) {
		step, h, read := setup(t)
		p := filepath.Join(step, OutputFile)
		os.Remove(p)
		os.WriteFile(p, []byte("the tool's other file"), 0o600)
		rewriteOutput(h, read, []byte("masked"))
		if b, _ := os.ReadFile(p); string(b) != "the tool's other file" {
			t.Fatalf("%q", b)
		}
	})
	t.Run("a FIFO swapped in, held open", func(t *testing.T) {
		step, h, read := setup(t)
		p := filepath.Join(step, OutputFile)
		os.Remove(p)
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		done := make(chan struct{})
		go func() { rewriteOutput(h, read, make([]byte, 8<<20)); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the rewrite waits on a FIFO")
		}
	})
}
