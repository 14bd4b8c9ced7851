package temporalx

import (
	"testing"

	"github.com/capflow/capflow/internal/config"
)

func TestUIBase(t *testing.T) {
	for _, tc := range []struct {
		name string
		t    config.Temporal
		env  string
		want string
	}{
		{"dev server default", config.Temporal{Address: "localhost:7233"}, "", "http://localhost:8233"},
		// The dev server's --ui-port and make cluster's Web UI: port + 1000.
		{"another port", config.Temporal{Address: "127.0.0.1:7833"}, "", "http://127.0.0.1:8833"},
		{"configured", config.Temporal{Address: "127.0.0.1:7233", UIURL: "https://ui.example.com/"}, "http://other", "https://ui.example.com"},
		{"environment", config.Temporal{Address: "127.0.0.1:7233"}, "http://ui:8080/", "http://ui:8080"},
		{"no port", config.Temporal{Address: "temporal"}, "", "http://localhost:8233"},
		{"port too high", config.Temporal{Address: "h:65000"}, "", "http://h:8233"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CAPFLOW_UI_URL", tc.env)
			if got := UIBase(tc.t); got != tc.want {
				t.Errorf("UIBase(%+v) = %q, want %q", tc.t, got, tc.want)
			}
		})
	}
	t.Setenv("CAPFLOW_UI_URL", "")
	got := RunURL(config.Temporal{Address: "127.0.0.1:7833", Namespace: "capflow"}, "wf", "r1")
	if want := "http://127.0.0.1:8833/namespaces/capflow/workflows/wf/r1/history"; got != want {
		t.Errorf("RunURL = %q, want %q", got, want)
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"localhost:7233": true, "127.0.0.1:7233": true, "127.5.0.1:1": true, "[::1]:7233": true,
		"temporal:7233": false, "10.0.0.1:7233": false, "example.com:443": false, "localhost": false, "": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
