package wfapi

import (
	"encoding"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/capflow/capflow/internal/caperr"
	"github.com/capflow/capflow/internal/envelope"
	"github.com/capflow/capflow/internal/gap"
	"github.com/capflow/capflow/internal/policy"
	"github.com/capflow/capflow/internal/verdict"
	"github.com/capflow/capflow/wire"
)

// wirePairs are the domain types the worker converts to the client's wire
// types (Wire), and those types: only the policy report, whose sandbox
// mode is a typed setting in the worker. Every other wire type is the
// domain's own (TestOneDefinition).
var wirePairs = []struct{ domain, wire reflect.Type }{
	{reflect.TypeFor[policy.Report](), reflect.TypeFor[wire.PolicyReport]()},
}

// Envelope, Gap, StepResult and the rest are defined once, in wire: the
// domain's names are aliases, so a field cannot be added to one and not
// the other, and nothing converts between them.
func TestOneDefinition(t *testing.T) {
	for _, c := range []struct{ domain, wire reflect.Type }{
		{reflect.TypeFor[envelope.Envelope](), reflect.TypeFor[wire.Envelope]()},
		{reflect.TypeFor[envelope.Feedback](), reflect.TypeFor[wire.Feedback]()},
		{reflect.TypeFor[envelope.ErrorInfo](), reflect.TypeFor[wire.ErrorInfo]()},
		{reflect.TypeFor[caperr.Code](), reflect.TypeFor[wire.ErrorCode]()},
		{reflect.TypeFor[caperr.Severity](), reflect.TypeFor[wire.Severity]()},
		{reflect.TypeFor[gap.Gap](), reflect.TypeFor[wire.Gap]()},
		{reflect.TypeFor[StepResult](), reflect.TypeFor[wire.StepResult]()},
		{reflect.TypeFor[Result](), reflect.TypeFor[wire.Result]()},
		{reflect.TypeFor[verdict.Problem](), reflect.TypeFor[wire.Problem]()},
		{reflect.TypeFor[policy.Violation](), reflect.TypeFor[wire.Violation]()},
		{reflect.TypeFor[gap.StepResolution]().Field(0).Type, reflect.TypeFor[wire.Resolution]()},
	} {
		if c.domain != c.wire {
			t.Errorf("%s is a type of its own; it must be %s (an alias, or embedded)", c.domain, c.wire)
		}
	}
}

// Each domain type has the JSON fields of its wire type, of the same
// kinds, by reflection: a field added to one and not the other fails.
func TestDomainTypesMatchTheWire(t *testing.T) {
	for _, p := range wirePairs {
		d, w := jsonFields(p.domain), jsonFields(p.wire)
		for name, kind := range d {
			if w[name] != kind {
				t.Errorf("%s.%s is %s; %s has %q", p.domain, name, kind, p.wire, w[name])
			}
		}
		for name := range w {
			if _, ok := d[name]; !ok {
				t.Errorf("%s has %s; %s does not", p.wire, name, p.domain)
			}
		}
	}
}

// Wire keeps every value: a domain value with every field set encodes to
// the JSON of what it converts to.
func TestWireKeepsEveryField(t *testing.T) {
	pr := fill(reflect.TypeFor[policy.Report]()).Interface().(policy.Report)
	want, _ := json.Marshal(pr)
	got, _ := json.Marshal(pr.Wire())
	if string(got) != string(want) {
		t.Errorf("policy report: wire %s\nwant %s", got, want)
	}
}

// jsonFields maps a struct's JSON field names to their kinds (a text
// marshaler is a string, as it encodes).
func jsonFields(t reflect.Type) map[string]string {
	out := map[string]string{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = kindOf(f.Type)
	}
	return out
}

func kindOf(t reflect.Type) string {
	switch {
	case t.Implements(reflect.TypeFor[encoding.TextMarshaler]()):
		return "string"
	case t.Kind() == reflect.Pointer:
		return "*" + kindOf(t.Elem())
	case t.Kind() == reflect.Slice:
		return "[]" + kindOf(t.Elem())
	case t.Kind() == reflect.Map:
		return "map[" + kindOf(t.Key()) + "]" + kindOf(t.Elem())
	}
	return t.Kind().String()
}

// fill is a value of t with every field set (not zero).
func fill(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64:
		v.SetInt(1)
	case reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		if t.Elem().Kind() == reflect.Struct && t.Elem().PkgPath() != "" && !strings.Contains(t.Elem().PkgPath(), "capflow") {
			return v // another module's type (a manifest's schema...): left nil
		}
		p := reflect.New(t.Elem())
		p.Elem().Set(fill(t.Elem()))
		v.Set(p)
	case reflect.Slice:
		v.Set(reflect.Append(reflect.MakeSlice(t, 0, 1), fill(t.Elem())))
	case reflect.Map:
		m := reflect.MakeMap(t)
		m.SetMapIndex(fill(t.Key()), fill(t.Elem()))
		v.Set(m)
	case reflect.Interface:
		v.Set(reflect.ValueOf("v"))
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && f.Tag.Get("json") != "-" {
				v.Field(i).Set(fill(f.Type))
			}
		}
	}
	return v
}

// A limit's workflow ID never carries its key's value (an account, a
// host): a digest of it.
func TestLimitWorkflowIDHidesTheKey(t *testing.T) {
	id := LimitWorkflowID("q", "tool drive-upload", "alice@example.com")
	if strings.Contains(id, "alice") || !strings.HasPrefix(id, "capflow-limit:q:tool:drive-upload:") || id == LimitWorkflowID("q", "tool drive-upload", "bob@example.com") {
		t.Fatalf("id %q", id)
	}
	if LimitWorkflowID("q", "capability video.download", "") != "capflow-limit:q:capability:video.download" {
		t.Fatal(LimitWorkflowID("q", "capability video.download", ""))
	}
	// Two projects (two task queues) share no limit (hostile findings at
	// 6003afe, 10).
	if LimitWorkflowID("qa", "tool lim1", "") == LimitWorkflowID("qb", "tool lim1", "") {
		t.Fatal("two projects share a limit")
	}
}

// TestLimitRequestCheck: what no attempt of capflow's sends is refused
// (hostile findings at 6003afe, 11).
func TestLimitRequestCheck(t *testing.T) {
	for _, c := range []struct {
		req  LimitRequest
		want string
	}{
		{LimitRequest{Holder: "a", Concurrency: 1, Lease: 30 * time.Second}, ""},
		{LimitRequest{Holder: "a", Interval: time.Second}, ""},
		{LimitRequest{Holder: "ghost", Concurrency: 1, Lease: 360000000000000000}, "lease"},
		{LimitRequest{Holder: "x", Concurrency: -1}, "concurrency -1"},
		{LimitRequest{Holder: "x"}, "needs a concurrency or a rate"},
		{LimitRequest{Holder: "x", Concurrency: 1, Interval: -5}, "interval"},
		{LimitRequest{Concurrency: 1}, "holder"},
	} {
		err := c.req.Check()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: %v, want %q", c.req, err, c.want)
		}
	}
}

// Whatever a plan puts in a limit's key (a flag, a path out, a megabyte,
// control bytes), the workflow ID is the scope and a 16-hex digest.
func TestLimitWorkflowIDOfHostileKeys(t *testing.T) {
	for _, key := range []string{"--output-path=/etc/passwd", "../../../etc", strings.Repeat("x", 1<<20), "a\x00b\nc", `"quoted"`} {
		id := LimitWorkflowID("q", "tool up", key)
		rest, ok := strings.CutPrefix(id, "capflow-limit:q:tool:up:")
		if !ok || len(rest) != 16 || strings.Trim(rest, "0123456789abcdef") != "" {
			t.Errorf("key %.20q: id %.80q", key, id)
		}
	}
}
