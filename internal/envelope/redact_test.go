package envelope

import (
	"encoding/json"
	"testing"
)

func TestRedactEveryForm(t *testing.T) {
	pem := "-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9\n-----END KEY-----"
	r := NewRedactor("987654321987", `pa"ss\word`, pem, "tok en/+=")
	cases := map[string]string{
		"987654321987":         Mask,
		`{"m":"pa\"ss\\word"}`: `{"m":"` + Mask + `"}`,
		`{"k":"-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9\n-----END KEY-----"}`: `{"k":"` + Mask + `"}`,
		"line: MIIBOgIBAAJBAKj34GkxFhD9":                                           "line: " + Mask,
		"q=tok+en%2F%2B%3D":                                                        "q=" + Mask,
		"b64 OTg3NjU0MzIxOTg3":                                                     "b64 " + Mask,
		"hex 393837363534333231393837":                                             "hex " + Mask,
	}
	for in, want := range cases {
		if got := r.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
	}
	v := r.Value(map[string]any{"n": float64(987654321987), "i": int64(987654321987), "j": json.Number("987654321987"), "ok": float64(42)})
	m := v.(map[string]any)
	for _, k := range []string{"n", "i", "j"} {
		if m[k] != Mask {
			t.Errorf("numeric secret %s not masked: %v", k, m[k])
		}
	}
	if m["ok"] != float64(42) {
		t.Errorf("ordinary number changed: %v", m["ok"])
	}
}

// A text cut short keeps no start of a secret at its end: the cut split it,
// so no whole match finds it (found reviewing issue 57).
func TestCutMasksASecretsStart(t *testing.T) {
	r := NewRedactor("ghp_S3cr3tT0kenValue0123")
	for in, want := range map[string]string{
		"token ghp_S3cr3tT0kenValue0123 and ghp_S3cr": "token " + Mask + " and " + Mask,
		"ends with ghp_":  "ends with " + Mask,
		"ends with gh":    "ends with gh", // shorter than a secret worth the name
		"nothing secret":  "nothing secret",
		"ghp_S3cr3tT0ken": Mask,
	} {
		if got := r.Cut(in); got != want {
			t.Errorf("Cut(%q) = %q, want %q", in, got, want)
		}
	}
	if got := (*Redactor)(nil).Cut("ghp_"); got != "ghp_" {
		t.Errorf("no secrets: %q", got)
	}
}

// A tail keeps no end of a secret at its start: the cut split it (an HTTP
// tool's answer, a command's stdout, kept as their last bytes).
func TestCutFrontMasksASecretsEnd(t *testing.T) {
	r := NewRedactor("ghp_S3cr3tT0kenValue0123")
	for in, want := range map[string]string{
		"T0kenValue0123 and ghp_S3cr3tT0kenValue0123 end": Mask + " and " + Mask + " end",
		"0123 starts":    Mask + " starts",
		"123 starts":     "123 starts", // shorter than a secret worth the name
		"nothing secret": "nothing secret",
		"kenValue0123":   Mask,
	} {
		if got := r.CutFront(in); got != want {
			t.Errorf("CutFront(%q) = %q, want %q", in, got, want)
		}
	}
	// Two secrets share a piece: the longer part at the edge is masked,
	// whichever secret is the longer.
	two := NewRedactor("xxxxxxxxxxxxxxxxxxxxxxxxQWER", "zQWERTYUIOPsecret")
	if got := two.CutFront("QWERTYUIOPsecret and more"); got != Mask+" and more" {
		t.Errorf("shared piece at the start: %q", got)
	}
	if got := two.Cut("and more zQWERTYUIOPsec"); got != "and more "+Mask {
		t.Errorf("shared piece at the end: %q", got)
	}
	// One secret inside another (a password inside a URL): masked first,
	// the inner one hid the outer one's piece at the edge (an attack on
	// this round's change).
	url, pw := "postgres://app_user:hunter2hunter2@db.internal.example:5432/prod", "hunter2hunter2"
	nested := NewRedactor(url, pw)
	for _, c := range []struct{ got, want string }{
		{nested.CutFront("ostgres://app_user:hunter2hunter2@db.internal.example:5432/prod more"), Mask + " more"},
		{nested.Cut("some output postgres://app_user:hunter2hunter2@db.inte"), "some output " + Mask},
		{nested.Cut("x hunter2hunter2@db.internal.example:5432/prod " + url[:30]), "x " + Mask + "@db.internal.example:5432/prod " + Mask},
		// A whole secret crossing the cut the edge chose goes with it.
		{NewRedactor("ABCDEFGH", "FGHIJKLMNOP").Cut("zz ABCDEFGHIJKL"), "zz " + Mask},
		{NewRedactor("IJKLMNOP", "ABCDEFGHIJ").CutFront("DEFGHIJKLMNOP zz"), Mask + " zz"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	if got := (*Redactor)(nil).CutFront("0123"); got != "0123" {
		t.Errorf("no secrets: %q", got)
	}
}
