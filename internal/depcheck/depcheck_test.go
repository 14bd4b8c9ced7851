package depcheck

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capflow/capflow/internal/manifest"
)

func TestCheck(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer ok.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	defer bad.Close()
	t.Setenv("CAPFLOW_DEP_SET", "1")
	c := New()
	tests := []struct {
		dep  manifest.Dependency
		want string
	}{
		{manifest.Dependency{Kind: "binary", Name: "sh"}, ""},
		{manifest.Dependency{Kind: "binary", Name: "capflow-no-such-binary"}, "not on PATH"},
		{manifest.Dependency{Kind: "binary", Name: "capflow-no-such-binary", Install: "make it"}, `binary "capflow-no-such-binary" is not on PATH (to install: make it)`},
		{manifest.Dependency{Kind: "binary", Name: "sh", Install: "never said when present"}, ""},
		{manifest.Dependency{Kind: "env", Name: "CAPFLOW_DEP_SET"}, ""},
		{manifest.Dependency{Kind: "env", Name: "CAPFLOW_DEP_UNSET"}, "is not set"},
		{manifest.Dependency{Kind: "service", Name: "up", URL: ok.URL}, ""},
		{manifest.Dependency{Kind: "service", Name: "sick", URL: bad.URL}, "HTTP 503"},
		{manifest.Dependency{Kind: "service", Name: "down", URL: "http://127.0.0.1:1/health"}, "does not answer"},
	}
	for _, tt := range tests {
		err := c.Check(tt.dep)
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%+v: %v, want %q", tt.dep, err, tt.want)
		}
	}
}
