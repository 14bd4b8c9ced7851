package codec

import (
	"bytes"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/capflow/capflow/wire"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
)

func key(b byte) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32)) }

func payload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRoundTripHidesThePlaintext(t *testing.T) {
	c, err := New(key(1))
	if err != nil {
		t.Fatal(err)
	}
	secret := map[string]any{"token": "tell-no-one-42"}
	enc, err := c.DataConverter().ToPayload(secret)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(enc.Data, []byte("tell-no-one")) || string(enc.Metadata["encoding"]) != Encoding || string(enc.Metadata["encryption-key-id"]) != c.KeyID() {
		t.Fatalf("not encrypted: %v", enc)
	}
	var back map[string]any
	if err := c.DataConverter().FromPayload(enc, &back); err != nil || back["token"] != "tell-no-one-42" {
		t.Fatalf("round trip: %v %v", back, err)
	}
	// Two encryptions of one value differ (fresh nonce).
	again, _ := c.DataConverter().ToPayload(secret)
	if bytes.Equal(again.Data, enc.Data) {
		t.Fatal("the nonce is reused")
	}
}

func TestDecodeRefusals(t *testing.T) {
	k1, _ := New(key(1))
	enc, _ := k1.Encode([]*commonpb.Payload{payload(t, "x")})
	tampered := &commonpb.Payload{Metadata: enc[0].Metadata, Data: append([]byte(nil), enc[0].Data...)}
	tampered.Data[len(tampered.Data)-1] ^= 1
	relabelled := &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte(Encoding), "encryption-key-id": []byte("00000000")}, Data: enc[0].Data}
	none, _ := New("")
	k2, _ := New(key(2))
	for _, tc := range []struct {
		name string
		c    *Codec
		in   *commonpb.Payload
		want string
	}{
		{"no key", none, enc[0], "set CAPFLOW_PAYLOAD_KEY"},
		{"another key", k2, enc[0], "does not hold"},
		{"tampered", k1, tampered, "does not decrypt"},
		{"key id swapped", k1, relabelled, "does not hold"},
		{"truncated", k1, &commonpb.Payload{Metadata: enc[0].Metadata, Data: []byte{1, 2}}, "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.Decode([]*commonpb.Payload{tc.in})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestRotationAndPlainPayloads(t *testing.T) {
	old, _ := New(key(1))
	enc, _ := old.Encode([]*commonpb.Payload{payload(t, "written with the old key")})
	rotated, err := New(key(2), key(1))
	if err != nil {
		t.Fatal(err)
	}
	plain := payload(t, "written before encryption")
	dec, err := rotated.Decode([]*commonpb.Payload{enc[0], plain})
	if err != nil {
		t.Fatal(err)
	}
	var a, b string
	_ = converter.GetDefaultDataConverter().FromPayload(dec[0], &a)
	_ = converter.GetDefaultDataConverter().FromPayload(dec[1], &b)
	if a != "written with the old key" || b != "written before encryption" {
		t.Fatalf("%q %q", a, b)
	}
	if re, _ := rotated.Encode([]*commonpb.Payload{plain}); string(re[0].Metadata["encryption-key-id"]) != rotated.KeyID() || rotated.KeyID() == old.KeyID() {
		t.Fatal("new payloads must use the current key")
	}
	none, _ := New("")
	if out, _ := none.Encode([]*commonpb.Payload{plain}); out[0] != plain {
		t.Fatal("without a key payloads pass through")
	}
}

func TestBadKeys(t *testing.T) {
	for _, tc := range []struct{ current, old, want string }{
		{"not base64!", "", "CAPFLOW_PAYLOAD_KEY: not base64"},
		{base64.StdEncoding.EncodeToString([]byte("short")), "", "5 bytes; AES-256 needs 32"},
		{key(1), "nope!", "CAPFLOW_PAYLOAD_OLD_KEYS (key 1): not base64"},
	} {
		if _, err := New(tc.current, tc.old); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q, %q) = %v, want %q", tc.current, tc.old, err, tc.want)
		}
	}
}

func TestHandlerDecodesForTheWebUI(t *testing.T) {
	c, _ := New(key(1))
	enc, _ := c.Encode([]*commonpb.Payload{payload(t, "for the web ui")})
	srv := httptest.NewServer(c.Handler([]string{"http://localhost:8233"}))
	defer srv.Close()

	pre, _ := http.NewRequest(http.MethodOptions, srv.URL+"/default/decode", nil)
	pre.Header.Set("Origin", "http://localhost:8233")
	resp, err := http.DefaultClient.Do(pre)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:8233" || !strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "X-Namespace") {
		t.Fatalf("preflight: %d %v", resp.StatusCode, resp.Header)
	}

	body, _ := protojson.Marshal(&commonpb.Payloads{Payloads: enc})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/default/decode", bytes.NewReader(body))
	req.Header.Set("Origin", "http://evil.example")
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var got commonpb.Payloads
	if err := protojson.Unmarshal(out, &got); err != nil || len(got.Payloads) != 1 {
		t.Fatalf("decode answer %d: %s", resp.StatusCode, out)
	}
	var s string
	if err := converter.GetDefaultDataConverter().FromPayload(got.Payloads[0], &s); err != nil || s != "for the web ui" {
		t.Fatalf("decoded %q %v", s, err)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatal("an origin not allowed got a CORS grant")
	}
}

// A body past the bound is refused (413) before it is decoded, chunked
// (no Content-Length) or not.
func TestHandlerBoundsTheBody(t *testing.T) {
	c, _ := New(key(1))
	srv := httptest.NewServer(c.Handler(nil))
	defer srv.Close()
	big := `{"payloads":[{"data":"` + strings.Repeat("A", MaxRequestBytes) + `"}]}`
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(big)
		if chunked {
			body = io.MultiReader(body) // hides the length: sent chunked
		}
		resp, err := http.Post(srv.URL+"/default/decode", "application/json", body)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("chunked %v: status %d", chunked, resp.StatusCode)
		}
	}
}

// A plan's step (it carries wire.PlanStepHeader) decodes nothing here,
// wherever its policy lets it reach the address.
func TestHandlerRefusesAPlan(t *testing.T) {
	c, _ := New(key(1))
	srv := httptest.NewServer(c.Handler(nil))
	defer srv.Close()
	req, _ := http.NewRequest("POST", srv.URL+"/default/decode", strings.NewReader(`{"payloads":[]}`))
	req.Header.Set(wire.PlanStepHeader, "run/step")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("status %d", resp.StatusCode)
	}
}
