package control

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
)

// Rate-limited scopes with tasks set aside are released one window at a
// time: each consumer that set one of their tasks aside runs a releaser
// for the scope (package dispatch), which asks RateHeld what the next
// window allows and ClaimWindow whether it is the one to release it.

// RateHeld is what a rate-limited scope's releaser needs to know.
type RateHeld struct {
	// Runnable: the scope has a rate limit and nothing of its own stops
	// it (no pause, no Retry-After). When it is not, whoever makes it
	// runnable releases its tasks (a resume, a Retry-After's end, a limit
	// changed), not its window releaser.
	Runnable bool
	// GlobalPaused: everything is paused. Nothing is received meanwhile,
	// and a global resume releases nothing, so the releaser waits it out
	// (releasing nothing) rather than stopping.
	GlobalPaused bool
	// Held: the scope's flag says it has tasks set aside (cached, at most
	// a TTL old).
	Held bool
	// Next is when the next window opens, Window its length, and N the
	// starts it allows.
	Next   time.Time
	Window time.Duration
	N      int
}

// RateHeld reads scope's settings through the cache (one read per TTL per
// scope, none per task) and says when its next window opens and how many
// starts it allows.
func (c *Controls) RateHeld(ctx context.Context, scope string) (RateHeld, error) {
	sc, ok := ParseScope(scope)
	if !ok || sc.Fair != "" {
		return RateHeld{}, fmt.Errorf("rate held: %q is not a control scope", scope)
	}
	global, err := c.cachedGet(ctx, "")
	if err != nil {
		return RateHeld{}, err
	}
	s, err := c.cachedScope(ctx, sc)
	if err != nil {
		return RateHeld{}, err
	}
	now := c.now()
	r := RateHeld{Held: s.Held, GlobalPaused: global.Paused}
	if s.RateLimitPerSecond <= 0 {
		return r, nil
	}
	r.Runnable = !s.Paused && !waiting(s, now)
	_, slot, window, limit := rateWindow("", s.RateLimitPerSecond, now)
	r.Next, r.Window, r.N = slot.Add(window), window, limit
	return r, nil
}

// ClaimWindow makes the caller the one consumer that releases scope's set-
// aside tasks for the window opening at next: one conditional put of a
// small item (RELEASE#<scope>#<window>, expiring after an hour), which
// only the first caller wins. Without it, every consumer holding the
// scope's tasks would release a window's worth, and all but one window's
// worth would be refused by the rate and set aside again, each costing a
// receive, a read and two writes.
//
// Cost: one write per consumer running the scope's releaser per window
// (a few a second for a 1/s scope, whatever its backlog); each window has
// its own partition key, so no key takes more than the consumer count.
func (c *Controls) ClaimWindow(ctx context.Context, scope string, next time.Time) (bool, error) {
	pk := "RELEASE#" + scope + "#" + strconv.FormatInt(next.UnixNano(), 10)
	_, err := c.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &c.table,
		Item: map[string]types.AttributeValue{
			spec.AttrPK:  &types.AttributeValueMemberS{Value: pk},
			spec.AttrTTL: &types.AttributeValueMemberN{Value: strconv.FormatInt(next.Add(time.Hour).Unix(), 10)},
		},
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": spec.AttrPK},
	})
	if isConditionFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim the release of %s's window at %s: %w", scope, next.Format(time.RFC3339Nano), err)
	}
	return true, nil
}
