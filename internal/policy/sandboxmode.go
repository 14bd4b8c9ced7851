package policy

import "fmt"

// SandboxMode is the policy's `sandbox:` setting: how command tools are
// confined (internal/sandbox does it).
type SandboxMode int

const (
	// SandboxDefault confines where the machine can and runs unconfined,
	// with a warning in the step result, where it cannot.
	SandboxDefault SandboxMode = iota
	// SandboxRequired refuses a step the machine cannot confine.
	SandboxRequired
	// SandboxOff runs every tool unconfined, as the worker's own user.
	SandboxOff
)

func (m SandboxMode) String() string {
	switch m {
	case SandboxRequired:
		return "required"
	case SandboxOff:
		return "off"
	}
	return "default"
}

// MarshalText writes the mode as policy.yaml does.
func (m SandboxMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads a mode.
func (m *SandboxMode) UnmarshalText(b []byte) error {
	v, err := ParseSandboxMode(string(b))
	*m = v
	return err
}

// ParseSandboxMode reads a policy's `sandbox:` value ("" is the default).
func ParseSandboxMode(s string) (SandboxMode, error) {
	switch s {
	case "", "default":
		return SandboxDefault, nil
	case "required":
		return SandboxRequired, nil
	case "off":
		return SandboxOff, nil
	}
	return SandboxDefault, fmt.Errorf("sandbox %q: want required, default or off", s)
}
