// Package depcheck verifies a tool's declared dependencies on this
// machine: a binary on PATH, an environment variable, a service answering.
package depcheck

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/capflow/capflow/internal/manifest"
)

// Checker checks dependencies, remembering answers for its lifetime (one
// plan check), so a binary shared by many steps is looked up once.
type Checker struct {
	LookPath  func(string) (string, error)
	LookupEnv func(string) (string, bool)
	Client    *http.Client
	Timeout   time.Duration
	// MCPServers are the configured MCP servers: name -> the command of a
	// stdio server (nil for an HTTP one).
	MCPServers map[string][]string

	mu    sync.Mutex
	cache map[manifest.Dependency]error
}

// New returns a checker for this machine.
func New() *Checker {
	return &Checker{LookPath: exec.LookPath, LookupEnv: os.LookupEnv, Client: http.DefaultClient, Timeout: 2 * time.Second}
}

// Check returns nil when d is available, else why not.
func (c *Checker) Check(d manifest.Dependency) error {
	c.mu.Lock()
	if c.cache == nil {
		c.cache = map[manifest.Dependency]error{}
	}
	if err, ok := c.cache[d]; ok {
		c.mu.Unlock()
		return err
	}
	c.mu.Unlock()
	err := c.check(d)
	if err != nil && d.Install != "" {
		err = fmt.Errorf("%w (to install: %s)", err, d.Install)
	}
	c.mu.Lock()
	c.cache[d] = err
	c.mu.Unlock()
	return err
}

func (c *Checker) check(d manifest.Dependency) error {
	switch d.Kind {
	case manifest.DepBinary:
		if _, err := c.LookPath(d.Name); err != nil {
			return fmt.Errorf("binary %q is not on PATH", d.Name)
		}
	case manifest.DepEnv:
		if v, ok := c.LookupEnv(d.Name); !ok || v == "" {
			return fmt.Errorf("environment variable %s is not set", d.Name)
		}
	case manifest.DepService:
		ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.URL, nil)
		if err != nil {
			return fmt.Errorf("service %s: %v", d.Name, err)
		}
		resp, err := c.Client.Do(req)
		if err != nil {
			return fmt.Errorf("service %s does not answer at %s", d.Name, d.URL)
		}
		resp.Body.Close()
		if resp.StatusCode >= 400 {
			return fmt.Errorf("service %s answered HTTP %d at %s", d.Name, resp.StatusCode, d.URL)
		}
	case manifest.DepRcloneRemote:
		return c.rcloneRemote(d.Name)
	case manifest.DepMCPServer:
		cmd, ok := c.MCPServers[d.Name]
		if !ok {
			return fmt.Errorf("MCP server %q is not configured (mcp_servers in capflow.yaml, docs/mcp.md)", d.Name)
		}
		if len(cmd) > 0 && !strings.Contains(cmd[0], "/") {
			if _, err := c.LookPath(cmd[0]); err != nil {
				return fmt.Errorf("MCP server %q: its command %q is not on PATH", d.Name, cmd[0])
			}
		}
	default:
		return fmt.Errorf("unknown dependency kind %q", d.Kind)
	}
	return nil
}

// rcloneRemote checks that rclone knows the remote (its config file, or
// RCLONE_CONFIG_<NAME>_TYPE and friends in the environment).
func (c *Checker) rcloneRemote(name string) error {
	how := fmt.Sprintf("set RCLONE_CONFIG_%s_TYPE (and the remote's options), or RCLONE_CONFIG naming a file `rclone config` wrote, in the environment of the worker and of the process that checks plans (capflow; docs/transfer.md)",
		strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name)))
	bin, err := c.LookPath("rclone")
	if err != nil {
		return fmt.Errorf("rclone remote %q: rclone is not on PATH", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "listremotes").Output()
	if err != nil {
		return fmt.Errorf("rclone remote %q: rclone listremotes failed (%v): %s", name, err, how)
	}
	for _, l := range strings.Fields(string(out)) {
		if l == name+":" {
			return nil
		}
	}
	return fmt.Errorf("rclone remote %q is not configured: %s", name, how)
}
