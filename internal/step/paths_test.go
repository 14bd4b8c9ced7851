package step

import (
	"testing"
)

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		path string
		ok   bool
	}{
		{"", true},
		{"/runs/r/steps/a/data.json", true},
		{"/runs/r", true},
		{"/runs/r/../r2/data.json", false},
		{"/runs/r2/data.json", false},
		{"/etc/passwd", false},
		{"steps/a", false},
	} {
		if err := Within("/runs/r", c.path); (err == nil) != c.ok {
			t.Errorf("Within(/runs/r, %q) = %v, want ok=%v", c.path, err, c.ok)
		}
	}
}

func TestLocalPath(t *testing.T) {
	run := "/srv/b/.capflow/runs/capflow-x-1"
	for _, c := range []struct{ remote, want string }{
		{"/other/host/.capflow/runs/capflow-x-1/steps/make/data.json", run + "/steps/make/data.json"},
		{"/other/host/.capflow/runs/capflow-x-1/steps/each/items/3/data.json", run + "/steps/each/items/3/data.json"},
		{"/other/host/.capflow/runs/capflow-x-1/records/make/data.json", run + "/records/make/data.json"},
		{"/elsewhere/data.json", run + "/records/make/data.json"},
		{"/h/.capflow/runs/capflow-x-1/../../../../etc/passwd", ""},
	} {
		got, ok := localPath(run, "capflow-x-1", c.remote, "make")
		if (c.want == "") == ok || (ok && got != c.want) {
			t.Errorf("%s: %q %v, want %q", c.remote, got, ok, c.want)
		}
	}
}
