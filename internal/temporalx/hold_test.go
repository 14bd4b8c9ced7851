package temporalx

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// ends answers attempts' ends: completions succeed, failures name an
// attempt the server no longer knows.
type ends struct {
	workflowservice.UnimplementedWorkflowServiceServer
	completed, failed, canceled atomic.Int32
}

func (e *ends) RespondActivityTaskCompleted(context.Context, *workflowservice.RespondActivityTaskCompletedRequest) (*workflowservice.RespondActivityTaskCompletedResponse, error) {
	e.completed.Add(1)
	return &workflowservice.RespondActivityTaskCompletedResponse{}, nil
}

// Cancellations time out on the server's side: a server that is there,
// but slow.
func (e *ends) RespondActivityTaskCanceled(context.Context, *workflowservice.RespondActivityTaskCanceledRequest) (*workflowservice.RespondActivityTaskCanceledResponse, error) {
	e.canceled.Add(1)
	return nil, status.Error(codes.DeadlineExceeded, "slow")
}

func (e *ends) RespondActivityTaskFailed(context.Context, *workflowservice.RespondActivityTaskFailedRequest) (*workflowservice.RespondActivityTaskFailedResponse, error) {
	e.failed.Add(1)
	return nil, serviceerror.ToStatus(serviceerror.NewNotFound("invalid activityID or activity already timed out")).Err()
}

// serve starts a WorkflowService of ends on addr and stops it with the test.
// (t.Error, not Fatal: it may be called off the test's goroutine.)
func serve(t *testing.T, addr string, srv workflowservice.WorkflowServiceServer) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Error(err)
		return
	}
	s := grpc.NewServer()
	workflowservice.RegisterWorkflowServiceServer(s, srv)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
}

// A free address nothing listens on yet.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func dialHeld(t *testing.T, addr string, limit time.Duration) workflowservice.WorkflowServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(holdActivityEnds(hclog.NewNullLogger(), limit, 50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return workflowservice.NewWorkflowServiceClient(conn)
}

// An attempt's end reported while no server listens outlives its caller's
// deadline and reaches the server once it is there; other calls, and ends
// the server answers, go as they came.
func TestAnAttemptsEndWaitsForTheServer(t *testing.T) {
	addr := freeAddr(t)
	c := dialHeld(t, addr, time.Minute)
	e := &ends{}
	time.AfterFunc(700*time.Millisecond, func() { serve(t, addr, e) })

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.RespondActivityTaskCompleted(ctx, &workflowservice.RespondActivityTaskCompletedRequest{}); err != nil {
		t.Fatalf("the end was not held for the server: %v", err)
	}
	if n := e.completed.Load(); n != 1 {
		t.Fatalf("the server got %d completions, want 1", n)
	}
	_, err := c.RespondActivityTaskFailed(context.Background(), &workflowservice.RespondActivityTaskFailedRequest{})
	if status.Code(err) != codes.NotFound || e.failed.Load() != 1 {
		t.Fatalf("an answered end was tried again or changed: %v, %d tries", err, e.failed.Load())
	}
	// A slow server may have taken the end: it is not sent again.
	_, err = c.RespondActivityTaskCanceled(context.Background(), &workflowservice.RespondActivityTaskCanceledRequest{})
	if status.Code(err) != codes.DeadlineExceeded || e.canceled.Load() != 1 {
		t.Fatalf("an end a slow server timed out was sent %d times: %v", e.canceled.Load(), err)
	}
}

// scripted answers completions with its codes in turn, then OK, and
// GetSystemInfo with Unavailable, counting both.
type scripted struct {
	workflowservice.UnimplementedWorkflowServiceServer
	codes        []codes.Code
	calls, infos atomic.Int32
}

func (s *scripted) RespondActivityTaskCompleted(context.Context, *workflowservice.RespondActivityTaskCompletedRequest) (*workflowservice.RespondActivityTaskCompletedResponse, error) {
	if n := int(s.calls.Add(1)); n <= len(s.codes) {
		return nil, status.Error(s.codes[n-1], "scripted")
	}
	return &workflowservice.RespondActivityTaskCompletedResponse{}, nil
}

func (s *scripted) GetSystemInfo(context.Context, *workflowservice.GetSystemInfoRequest) (*workflowservice.GetSystemInfoResponse, error) {
	s.infos.Add(1)
	return nil, status.Error(codes.Unavailable, "scripted")
}

// Once held, an end rides out the server's passing trouble as the SDK's
// retries would have; a message too large, or any trouble at first but
// unavailability, is returned at once; other calls are never held.
func TestHeldEndsRideOutPassingTrouble(t *testing.T) {
	for _, c := range []struct {
		name  string
		codes []codes.Code
		want  codes.Code
		calls int32
	}{
		{"unavailable, then busy, then answered", []codes.Code{codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.Internal}, codes.OK, 5},
		{"busy at first is the SDK's to retry", []codes.Code{codes.ResourceExhausted}, codes.ResourceExhausted, 1},
		{"a refusal is final", []codes.Code{codes.Unavailable, codes.PermissionDenied}, codes.PermissionDenied, 2},
	} {
		addr := freeAddr(t)
		s := &scripted{codes: c.codes}
		serve(t, addr, s)
		cl := dialHeld(t, addr, time.Minute)
		_, err := cl.RespondActivityTaskCompleted(context.Background(), &workflowservice.RespondActivityTaskCompletedRequest{})
		if status.Code(err) != c.want || s.calls.Load() != c.calls {
			t.Errorf("%s: %v after %d calls, want %s after %d", c.name, err, s.calls.Load(), c.want, c.calls)
		}
		if _, err := cl.GetSystemInfo(context.Background(), &workflowservice.GetSystemInfoRequest{}); status.Code(err) != codes.Unavailable || s.infos.Load() != 1 {
			t.Errorf("%s: GetSystemInfo was held: %d calls, %v", c.name, s.infos.Load(), err)
		}
	}
}

// An end gives up after its limit.
func TestEndsAreNotHeldForever(t *testing.T) {
	c := dialHeld(t, freeAddr(t), 300*time.Millisecond)
	_, err := c.RespondActivityTaskCompleted(context.Background(), &workflowservice.RespondActivityTaskCompletedRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("an end with no server past its limit: %v", err)
	}
}

// A server whose certificate the worker refuses is there, and waiting will
// not change it: the end is returned at once, not held for minutes (the
// TLS handshake's failure is Unavailable to gRPC too).
func TestARefusedCertificateIsNotHeld(t *testing.T) {
	addr := freeAddr(t)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.Creds(credentials.NewServerTLSFromCert(selfSigned(t))))
	e := &ends{}
	workflowservice.RegisterWorkflowServiceServer(s, e)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	var said strings.Builder
	log := hclog.New(&hclog.LoggerOptions{Output: &said, Level: hclog.Info})
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})),
		grpc.WithChainUnaryInterceptor(holdActivityEnds(log, 2*time.Second, 50*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_, err = workflowservice.NewWorkflowServiceClient(conn).RespondActivityTaskCompleted(context.Background(), &workflowservice.RespondActivityTaskCompletedRequest{})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "certificate") || e.completed.Load() != 0 || said.Len() != 0 {
		t.Fatalf("an end refused at the handshake: %v (%d completed), the worker said %q", err, e.completed.Load(), said.String())
	}
}

// selfSigned is a certificate for 127.0.0.1 that no one trusts.
func selfSigned(t *testing.T) *tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "capflow-test"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// Only a certificate refused ends a hold: a handshake cut short by a
// server or load balancer that restarts is waited out as any outage.
func TestCertificateRefused(t *testing.T) {
	const h = `connection error: desc = "transport: authentication handshake failed: `
	for msg, want := range map[string]bool{
		h + `tls: failed to verify certificate: x509: certificate signed by unknown authority"`:       true,
		h + `remote error: tls: bad certificate"`:                                                     true,
		h + `remote error: tls: certificate required"`:                                                true,
		`connection error: desc = "error reading server preface: remote error: tls: bad certificate"`: true,
		h + `tls: first record does not look like a TLS handshake"`:                                   true,
		h + `EOF"`: false,
		h + `read tcp 127.0.0.1:5->127.0.0.1:7233: read: connection reset by peer"`:                                       false,
		h + `context deadline exceeded"`:                                                                                  false,
		`connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:7233: connect: connection refused"`: false,
	} {
		if got := certificateRefused(msg); got != want {
			t.Errorf("%s: %v, want %v", msg, got, want)
		}
	}
}
