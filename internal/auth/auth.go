// Package auth checks bearer tokens and their scopes.
//
// A token grants one or more scopes: submit (create tasks), read (get, list,
// stats) and admin (everything). Tokens are compared in constant time.
package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Scope is a permission a token grants.
type Scope string

// The scopes. Admin implies the others.
const (
	Submit Scope = "submit"
	Read   Scope = "read"
	Admin  Scope = "admin"
)

// Sentinel errors.
var (
	ErrUnauthenticated = errors.New("missing or unknown bearer token")
	ErrForbidden       = errors.New("token lacks the scope")
)

type entry struct {
	hash   [32]byte
	scopes map[Scope]bool
}

// Tokens is a set of tokens with their scopes.
type Tokens struct {
	entries []entry
}

// Add grants scopes to token.
func (t *Tokens) Add(token string, scopes ...Scope) {
	e := entry{hash: sha256.Sum256([]byte(token)), scopes: map[Scope]bool{}}
	for _, s := range scopes {
		e.scopes[s] = true
	}
	t.entries = append(t.entries, e)
}

// Len is the number of tokens.
func (t *Tokens) Len() int { return len(t.entries) }

// Parse reads "token:scope+scope,token2:scope" (a token with no scopes is admin).
func Parse(s string) (*Tokens, error) {
	t := &Tokens{}
	if strings.TrimSpace(s) == "" {
		return t, nil
	}
	for _, part := range strings.Split(s, ",") {
		tok, scopes, _ := strings.Cut(strings.TrimSpace(part), ":")
		if tok == "" {
			return nil, fmt.Errorf("empty token in %q", part)
		}
		var ss []Scope
		if scopes == "" {
			ss = []Scope{Admin}
		}
		for _, sc := range strings.Split(scopes, "+") {
			if sc == "" {
				continue
			}
			s, err := ParseScope(sc)
			if err != nil {
				return nil, err
			}
			ss = append(ss, s)
		}
		t.Add(tok, ss...)
	}
	return t, nil
}

// TokenHeader carries the token when the Authorization header is taken:
// behind API Gateway IAM authorization, callers sign requests with SigV4,
// which owns Authorization, so the token travels here instead.
const TokenHeader = "X-Triage-Token"

// CheckRequest verifies r's token: the TokenHeader value when present,
// otherwise the Authorization header's bearer token.
func (t *Tokens) CheckRequest(r *http.Request, need Scope) error {
	if tok := r.Header.Get(TokenHeader); tok != "" {
		return t.Check("Bearer "+tok, need)
	}
	return t.Check(r.Header.Get("Authorization"), need)
}

// Check verifies that the Authorization header value carries a known token
// with scope need. Every stored token is compared, so timing does not
// reveal which one matched.
func (t *Tokens) Check(header string, need Scope) error {
	tok, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || tok == "" {
		return ErrUnauthenticated
	}
	h := sha256.Sum256([]byte(tok))
	var found *entry
	for i := range t.entries {
		if subtle.ConstantTimeCompare(h[:], t.entries[i].hash[:]) == 1 {
			found = &t.entries[i]
		}
	}
	if found == nil {
		return ErrUnauthenticated
	}
	if found.scopes[Admin] || found.scopes[need] {
		return nil
	}
	return fmt.Errorf("%w %q", ErrForbidden, need)
}

// ParseSecret reads the tokens kept in a secret: either the TRIAGE_TOKENS
// form ("token:scope+scope,token2"), a single bare token (admin), or JSON
// {"tokens":[{"token":"...","scopes":["submit","read"]}]}.
func ParseSecret(s string) (*Tokens, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "{") {
		return Parse(s)
	}
	var doc struct {
		Tokens []struct {
			Token  string   `json:"token"`
			Scopes []string `json:"scopes"`
		} `json:"tokens"`
	}
	if err := json.Unmarshal([]byte(s), &doc); err != nil {
		return nil, fmt.Errorf("tokens secret is not valid JSON: %w", err)
	}
	t := &Tokens{}
	for i, e := range doc.Tokens {
		if e.Token == "" {
			return nil, fmt.Errorf("tokens[%d]: empty token", i)
		}
		var ss []Scope
		for _, sc := range e.Scopes {
			s, err := ParseScope(sc)
			if err != nil {
				return nil, fmt.Errorf("tokens[%d]: %w", i, err)
			}
			ss = append(ss, s)
		}
		if len(ss) == 0 {
			ss = []Scope{Admin}
		}
		t.Add(e.Token, ss...)
	}
	return t, nil
}

// Merge adds every token of o to t.
func (t *Tokens) Merge(o *Tokens) { t.entries = append(t.entries, o.entries...) }

// Hash is the hex SHA-256 of token: the form a token is kept in at rest
// (AddHash), so the table that keeps tokens never holds one a reader
// could present.
func Hash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// AddHash grants scopes to the token whose Hash is hexHash.
func (t *Tokens) AddHash(hexHash string, scopes ...Scope) error {
	b, err := hex.DecodeString(hexHash)
	if err != nil || len(b) != sha256.Size {
		return fmt.Errorf("token hash %q is not a hex SHA-256", hexHash)
	}
	e := entry{scopes: map[Scope]bool{}}
	copy(e.hash[:], b)
	for _, s := range scopes {
		e.scopes[s] = true
	}
	t.entries = append(t.entries, e)
	return nil
}

// ParseScope reads one scope's name.
func ParseScope(s string) (Scope, error) {
	switch sc := Scope(s); sc {
	case Submit, Read, Admin:
		return sc, nil
	}
	return "", fmt.Errorf("unknown scope %q (want submit, read or admin)", s)
}

// ParseScopes reads a comma-separated list of scopes ("submit,read");
// an empty list is an error.
func ParseScopes(s string) ([]Scope, error) {
	var out []Scope
	for _, sc := range strings.Split(s, ",") {
		sc = strings.TrimSpace(sc)
		if sc == "" {
			continue
		}
		s, err := ParseScope(sc)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no scope given (want submit, read or admin)")
	}
	return out, nil
}

// TokenPrefix starts every token NewToken makes, so a leaked one is
// recognisable (secret scanners, logs).
const TokenPrefix = "trg_"

// NewToken returns a new random token: TokenPrefix and 32 bytes from
// crypto/rand, base64url without padding (47 characters in all).
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}
