// Package codec encrypts capflow's Temporal payloads (workflow inputs and
// results, activity inputs and outputs, queries, updates, heartbeats,
// memos and failure messages) with AES-256-GCM, so they are not readable
// in Temporal's database, and serves the Temporal codec-server protocol so
// the Web UI can show them to people who hold the key
// (docs/deployment.md#payload-encryption).
//
// Workers, the CLI and every client of a namespace must use the same keys:
// a payload written with a key this process lacks fails to decode with an
// error naming the key's ID. Payloads written before encryption was turned
// on are read as they are.
package codec

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/capflow/capflow/wire"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/proto"
)

// Environment variables holding the keys: the current key (base64 of 32
// random bytes: `openssl rand -base64 32`), which encrypts and decrypts,
// and older keys (comma-separated) that only decrypt, for rotation.
const (
	KeyEnv     = "CAPFLOW_PAYLOAD_KEY"
	OldKeysEnv = "CAPFLOW_PAYLOAD_OLD_KEYS"
)

// Metadata of an encrypted payload.
const (
	Encoding    = "binary/encrypted"
	metaEnc     = "encoding"
	metaKeyID   = "encryption-key-id"
	metaCipher  = "encryption-cipher"
	cipherLabel = "AES-256-GCM"
)

// Codec is a converter.PayloadCodec. The zero value (no keys) passes
// payloads through and refuses encrypted ones with a clear error.
type Codec struct {
	current string // key ID that encrypts; "" = no encryption
	keys    map[string]cipher.AEAD
}

// New makes a codec that encrypts with current and decrypts with current
// and old. Keys are base64 (standard or URL) of 32 bytes.
func New(current string, old ...string) (*Codec, error) {
	c := &Codec{keys: map[string]cipher.AEAD{}}
	for i, k := range append([]string{current}, old...) {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		id, aead, err := parseKey(k)
		if err != nil {
			if i == 0 {
				return nil, fmt.Errorf("%s: %w", KeyEnv, err)
			}
			return nil, fmt.Errorf("%s (key %d): %w", OldKeysEnv, i, err)
		}
		if i == 0 {
			c.current = id
		}
		c.keys[id] = aead
	}
	return c, nil
}

// FromEnv is New with the keys from CAPFLOW_PAYLOAD_KEY and
// CAPFLOW_PAYLOAD_OLD_KEYS.
func FromEnv() (*Codec, error) {
	var old []string
	if v := os.Getenv(OldKeysEnv); v != "" {
		old = strings.Split(v, ",")
	}
	return New(os.Getenv(KeyEnv), old...)
}

// Enabled reports whether the codec encrypts.
func (c *Codec) Enabled() bool { return c.current != "" }

// KeyID names the current key (the first 8 hex digits of its SHA-256),
// safe to log.
func (c *Codec) KeyID() string { return c.current }

func parseKey(s string) (string, cipher.AEAD, error) {
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		if raw, err = base64.URLEncoding.DecodeString(s); err != nil {
			return "", nil, errors.New("not base64 (make one with `openssl rand -base64 32`)")
		}
	}
	if len(raw) != 32 {
		return "", nil, fmt.Errorf("%d bytes; AES-256 needs 32 (make one with `openssl rand -base64 32`)", len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return "", nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:4]), aead, nil
}

// Encode encrypts each payload (the whole payload, metadata included)
// with the current key; without one it returns them unchanged.
func (c *Codec) Encode(in []*commonpb.Payload) ([]*commonpb.Payload, error) {
	if !c.Enabled() {
		return in, nil
	}
	aead := c.keys[c.current]
	out := make([]*commonpb.Payload, len(in))
	for i, p := range in {
		plain, err := proto.Marshal(p)
		if err != nil {
			return nil, err
		}
		nonce := make([]byte, aead.NonceSize())
		if _, err := rand.Read(nonce); err != nil {
			return nil, err
		}
		out[i] = &commonpb.Payload{
			Metadata: map[string][]byte{metaEnc: []byte(Encoding), metaKeyID: []byte(c.current), metaCipher: []byte(cipherLabel)},
			// The key ID is authenticated too: a payload cannot be passed
			// off as another key's.
			Data: aead.Seal(nonce, nonce, plain, []byte(c.current)),
		}
	}
	return out, nil
}

// Decode decrypts encrypted payloads and leaves others as they are.
func (c *Codec) Decode(in []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(in))
	for i, p := range in {
		if string(p.GetMetadata()[metaEnc]) != Encoding {
			out[i] = p
			continue
		}
		id := string(p.GetMetadata()[metaKeyID])
		aead, ok := c.keys[id]
		if !ok {
			if len(c.keys) == 0 {
				return nil, fmt.Errorf("this payload is encrypted (key %s): set %s to the key the workers use", id, KeyEnv)
			}
			return nil, fmt.Errorf("this payload is encrypted with key %s, which this process does not hold (it has %s): add it to %s", id, strings.Join(c.ids(), ", "), OldKeysEnv)
		}
		ns := aead.NonceSize()
		if len(p.Data) < ns {
			return nil, fmt.Errorf("encrypted payload of %d bytes is truncated", len(p.Data))
		}
		plain, err := aead.Open(nil, p.Data[:ns], p.Data[ns:], []byte(id))
		if err != nil {
			return nil, fmt.Errorf("encrypted payload (key %s) does not decrypt: altered, or another key with the same ID", id)
		}
		var dec commonpb.Payload
		if err := proto.Unmarshal(plain, &dec); err != nil {
			return nil, fmt.Errorf("decrypted payload is not a payload: %v", err)
		}
		out[i] = &dec
	}
	return out, nil
}

func (c *Codec) ids() []string {
	var out []string
	for id := range c.keys {
		out = append(out, id)
	}
	return out
}

// DataConverter is Temporal's default converter with this codec on top.
func (c *Codec) DataConverter() converter.DataConverter {
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), c)
}

// FailureConverter also moves failure messages and stack traces into
// encrypted attributes when the codec encrypts (tool errors can quote
// what a tool read).
func (c *Codec) FailureConverter() converter.FailureConverter {
	return temporal.NewDefaultFailureConverter(temporal.DefaultFailureConverterOptions{
		DataConverter: c.DataConverter(), EncodeCommonAttributes: c.Enabled(),
	})
}

// Handler serves the codec-server protocol (POST …/encode and …/decode,
// JSON payloads) that the Temporal Web UI and CLI call, with CORS for the
// given Web UI origins ("*" allows any).
func (c *Codec) Handler(origins []string) http.Handler {
	inner := converter.NewPayloadCodecHTTPHandler(c)
	allowed := map[string]bool{}
	for _, o := range origins {
		allowed[strings.TrimRight(o, "/")] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(wire.PlanStepHeader) != "" {
			http.Error(w, "a plan's step may not use the codec server", http.StatusForbidden)
			return
		}
		o := r.Header.Get("Origin")
		switch {
		case o != "" && allowed[o]:
			w.Header().Set("Access-Control-Allow-Origin", o)
			// The Web UI's "pass access token" sends its credentials.
			w.Header().Set("Access-Control-Allow-Credentials", "true")
		case o != "" && allowed["*"]:
			// Any origin, but never with credentials.
			w.Header().Set("Access-Control-Allow-Origin", "*")
		}
		if w.Header().Get("Access-Control-Allow-Origin") != "" {
			w.Header().Set("Access-Control-Allow-Headers", "Content-Type,X-Namespace,Authorization")
			w.Header().Set("Access-Control-Allow-Methods", "POST,OPTIONS")
			w.Header().Set("Vary", "Origin")
		}
		if r.Method == http.MethodOptions {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		// Read whole, bounded, before decoding: decoding JSON payloads costs
		// ~20 times their size, and Temporal keeps a payload under 2 MB.
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
		if err != nil {
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		if len(body) > MaxRequestBytes {
			http.Error(w, fmt.Sprintf("request body over %d MiB", MaxRequestBytes>>20), http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		inner.ServeHTTP(w, r)
	})
}

// MaxRequestBytes bounds one codec-server request's body.
const MaxRequestBytes = 8 << 20
