//go:build linux && !amd64

package sandbox

// legacyModeCalls: arm64 (and the other 64-bit ports) have only the *at
// calls (seccomp_linux.go).
var legacyModeCalls []modeCall
