package apiapp

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/triagehq/triage/internal/app"
	"github.com/triagehq/triage/internal/auth"
	"github.com/triagehq/triage/internal/store"
)

// TokensRefresh is how often, at most, the API reads the table's tokens
// again: a token created with `triage tokens create` works, and a revoked
// one stops working, within this long. The read happens on a request, so
// an idle API reads nothing; a busy one makes one GetItem per instance
// per TokensRefresh.
const TokensRefresh = time.Minute

// tokensRetry is how soon a failed read of the table's tokens is tried
// again; the tokens last read stay in force meanwhile.
const tokensRetry = 5 * time.Second

// TableTokens is the API's api.Authorizer: the fixed tokens (Tokens) and
// the tokens minted into the table (store.Store.Tokens), read again on
// the first request after every refresh period.
type TableTokens struct {
	fixed *auth.Tokens
	store *store.Store
	every time.Duration
	log   *slog.Logger

	mu     sync.Mutex
	cur    *auth.Tokens
	loaded time.Time // when cur was read; zero: never
}

// TableAuth returns a's TableTokens, refreshed every `every`
// (TokensRefresh when 0), with the table's tokens read once now. With no
// token at all it still serves (every request gets 401) and logs how to
// create one. A failed read of the table is logged, not returned: the
// fixed tokens serve until a later read succeeds.
func TableAuth(ctx context.Context, a *app.App, sm SecretReader, every time.Duration) (*TableTokens, error) {
	fixed, err := fixedTokens(ctx, a, sm)
	if err != nil {
		return nil, err
	}
	if every <= 0 {
		every = TokensRefresh
	}
	t := &TableTokens{fixed: fixed, store: a.Store, every: every, log: a.Log, cur: fixed}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	if cur := t.current(ctx); cur.Len() == 0 {
		t.log.Warn("no API tokens: every request is refused with 401 until one is created with `triage tokens create --name NAME --scope admin` (AWS credentials for the table, TRIAGE_TABLE set to the stack's TableName output)",
			"table", a.Store.Table())
	}
	return t, nil
}

// CheckRequest checks r's token against the tokens as last read (see
// auth.Tokens.CheckRequest), reading the table's first when they are
// older than the refresh period.
func (t *TableTokens) CheckRequest(r *http.Request, need auth.Scope) error {
	return t.current(r.Context()).CheckRequest(r, need)
}

// current returns the tokens, read again from the table when the last
// read is a refresh period old. One read runs at a time; requests wait
// for it (a GetItem, once a period).
func (t *TableTokens) current(ctx context.Context) *auth.Tokens {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if !t.loaded.IsZero() && now.Sub(t.loaded) < t.every {
		return t.cur
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
	defer cancel()
	stored, err := t.store.Tokens(ctx)
	if err != nil {
		t.log.Warn("read the table's API tokens failed; the tokens last read stay in force", "error", err)
		t.loaded = now.Add(tokensRetry - t.every)
		return t.cur
	}
	next := &auth.Tokens{}
	next.Merge(t.fixed)
	for _, s := range stored {
		var scopes []auth.Scope
		for _, name := range s.Scopes {
			sc, err := auth.ParseScope(name)
			if err != nil {
				t.log.Warn("a stored API token names an unknown scope, which grants nothing", "name", s.Name, "error", err)
				continue
			}
			scopes = append(scopes, sc)
		}
		if err := next.AddHash(s.Hash, scopes...); err != nil {
			t.log.Warn("a stored API token is unreadable and refused", "name", s.Name, "error", err)
		}
	}
	t.cur, t.loaded = next, now
	return next
}
