package report

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"
)

// exampleSecret is the controller secret of the worked example in
// docs/push-protocol.md.
const exampleSecret = "flowweight-example-secret-32byte"

// deriveVectors are the documented golden vectors; another implementation
// reproduces them from the salt and info strings alone.
var deriveVectors = []struct{ id, key string }{
	{"web-1", "980ff972f047efc421b8d1a4cdae593a5b04b538b25542dd95f83d52b90fb78f"},
	{"api-2.dc1", "0a7749cba9bbe808801c311c957b4a00c42f4246a54cd1100c45404d522eecfc"},
}

func TestDeriveKeyVectors(t *testing.T) {
	doc, err := os.ReadFile("../../docs/push-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range deriveVectors {
		got, err := DeriveKey([]byte(exampleSecret), v.id)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != v.key {
			t.Errorf("DeriveKey(example, %q) = %s, want %s", v.id, got, v.key)
		}
		// RFC 5869 by hand: one block of expand is all 32 bytes take.
		prk := hmacSum([]byte(DeriveSalt), []byte(exampleSecret))
		okm := hmacSum(prk, append([]byte(DeriveInfoPrefix+v.id), 1))
		if hex.EncodeToString(okm) != v.key {
			t.Errorf("%s: HKDF by hand gives %x", v.id, okm)
		}
		if !strings.Contains(string(doc), v.key) || !strings.Contains(string(doc), "`"+v.id+"`") {
			t.Errorf("docs/push-protocol.md does not show the vector of %q (%s)", v.id, v.key)
		}
	}
	for _, s := range []string{exampleSecret, DeriveSalt, DeriveInfoPrefix} {
		if !strings.Contains(string(doc), s) {
			t.Errorf("docs/push-protocol.md does not spell out %q", s)
		}
	}
}

func hmacSum(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}

func TestDeriveKeyProperties(t *testing.T) {
	a, _ := DeriveKey([]byte(exampleSecret), "web-1")
	b, _ := DeriveKey([]byte(exampleSecret), "web-2")
	c, _ := DeriveKey([]byte(exampleSecret+"x"), "web-1")
	if string(a) == string(b) || string(a) == string(c) {
		t.Error("keys of different backends or secrets coincide")
	}
	if len(a) != 64 || strings.ToLower(string(a)) != string(a) {
		t.Errorf("key %q: want 64 lowercase hex digits", a)
	}
	tests := []struct {
		name, secret, id, want string
	}{
		{"short secret", "too-short", "web-1", "secret is 9 bytes"},
		{"bad id", exampleSecret, "web 1", `"web 1"`},
		{"empty id", exampleSecret, "", `""`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := DeriveKey([]byte(tt.secret), tt.id)
			if err == nil || !strings.Contains(err.Error(), tt.want) || k != nil {
				t.Errorf("DeriveKey: %q, %v; want an error saying %q", k, err, tt.want)
			}
		})
	}
}
