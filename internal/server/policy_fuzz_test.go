package server

import (
	"encoding/json"
	"testing"

	"github.com/execbox/execbox/api"
)

// decisionSeeds are hook answers, good and bad.
var decisionSeeds = []struct {
	in   string
	want *api.PolicyDecision // nil: refused
}{
	{`{"allow":true}`, &api.PolicyDecision{Allow: true}},
	{`{"allow":false,"reason":"rm -rf is not allowed"}`, &api.PolicyDecision{Reason: "rm -rf is not allowed"}},
	{` {"reason":null,"allow":false,"score":0.9} `, &api.PolicyDecision{}},
	{`{"allow":true,"reason":"fine","extra":{"a":[1,2]}}`, &api.PolicyDecision{Allow: true, Reason: "fine"}},
	{`{}`, nil},
	{`{"Allow":true}`, nil}, // exactly "allow"
	{`{"allow":"true"}`, nil},
	{`{"allow":1}`, nil},
	{`{"allow":null}`, nil},
	{`{"allow":true,"reason":5}`, nil},
	{`{"allow":true} {"allow":false}`, nil},
	{`{"allow":true}x`, nil},
	{`[{"allow":true}]`, nil},
	{`null`, nil},
	{`true`, nil},
	{``, nil},
	{`{"allow":tru`, nil},
}

func TestDecodeDecision(t *testing.T) {
	for _, s := range decisionSeeds {
		d, err := decodeDecision([]byte(s.in))
		switch {
		case s.want == nil && err == nil:
			t.Errorf("decodeDecision(%s) = %+v, want an error", s.in, d)
		case s.want != nil && (err != nil || d != *s.want):
			t.Errorf("decodeDecision(%s) = %+v, %v; want %+v", s.in, d, err, *s.want)
		}
	}
}

// FuzzDecodeDecision: a hook's answer never panics the decoder; what it
// accepts is one valid JSON object with a boolean "allow", and decodes
// the same once re-encoded.
func FuzzDecodeDecision(f *testing.F) {
	for _, s := range decisionSeeds {
		f.Add([]byte(s.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := decodeDecision(b)
		if err != nil {
			if d != (api.PolicyDecision{}) {
				t.Errorf("refused %q but returned %+v", b, d)
			}
			return
		}
		if !json.Valid(b) {
			t.Fatalf("accepted invalid JSON %q", b)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("accepted %q, which is not an object: %v", b, err)
		}
		if allow, ok := m["allow"].(bool); !ok || allow != d.Allow {
			t.Fatalf("accepted %q as allow=%v; its allow is %#v", b, d.Allow, m["allow"])
		}
		again, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		if d2, err := decodeDecision(again); err != nil || d2 != d {
			t.Fatalf("round trip of %+v: %+v, %v", d, d2, err)
		}
	})
}
