package examples

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	cases := []struct {
		name, line string
		want       Promise
		err        string
	}{
		{"statuses", "# expect: check=ready run=passed", Promise{Check: "ready", Run: "passed"}, ""},
		{"prose is skipped", "# expect: check=partial-complete without ffmpeg, ready with ffmpeg", Promise{Check: "partial-complete"}, ""},
		{"outputs, steps, interrupted", "# expect: run=passed outputs.text=a-b steps.c=succeeded interrupted.count=TASK_TIMEOUT",
			Promise{Run: "passed", Outputs: map[string]string{"text": "a-b"}, Steps: map[string]string{"c": "succeeded"}, Interrupted: map[string]string{"count": "TASK_TIMEOUT"}}, ""},
		{"an unknown key", "# expect: run=passed output.text=x", Promise{}, `p.yaml:2: expect: "output.text=x" is not`},
	}
	for _, c := range cases {
		dir := t.TempDir()
		f := filepath.Join(dir, "p.yaml")
		if err := os.WriteFile(f, []byte("# a plan\n"+c.line+"\nname: p\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := Read(f)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.err)
			}
			continue
		}
		for _, m := range []*map[string]string{&c.want.Outputs, &c.want.Steps, &c.want.Interrupted} {
			if *m == nil {
				*m = map[string]string{}
			}
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v %v, want %+v", c.name, got, err, c.want)
		}
	}
}
