package temporalx

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/config"
)

// An address that answers HTTP (the Web UI's port, given for the
// server's) is named as such, with how to point capflow at the server.
func TestDialAnHTTPPort(t *testing.T) {
	ui := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("<html>")) }))
	defer ui.Close()
	addr := strings.TrimPrefix(ui.URL, "http://")
	cfg := &config.Config{Temporal: config.Temporal{Address: addr, Namespace: "default"}}
	c, err := Dial(context.Background(), cfg, hclog.NewNullLogger())
	if err == nil {
		c.Close()
		t.Fatal("dialled an HTTP server as Temporal")
	}
	if caperr.CodeOf(err) != caperr.DependencyUnavailable || !strings.Contains(err.Error(), addr+" answers HTTP, not Temporal's gRPC: is it the Web UI's port?") ||
		!strings.Contains(err.Error(), "CAPFLOW_TEMPORAL_ADDRESS") {
		t.Fatalf("%s: %v", caperr.CodeOf(err), err)
	}
}
