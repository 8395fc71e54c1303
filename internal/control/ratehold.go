package control

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
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

// Reservations. A task released for a rate window (ReleaseAt with the
// window's opening) has its start counted in that window before it is
// sent: Reserve adds the released tasks to the window's count while the
// window has not opened yet, so no arrival can have spent it, and each
// released task carries the reservation (task.Task.RateWindow). Received
// in that window, Decide admits it past the rate without counting it
// again; arrivals meanwhile find the window full and are set aside behind
// the held set. So a released task is never refused by arrivals in its
// window. Received before it (SQS delays are whole seconds, rounded up,
// so only with a skewed clock), it is hidden until the window opens.
// Received after it (its message sat behind a backlog on the queue, a
// consumer without a free slot, a release slower than the window), the
// reservation has lapsed and it takes a count like any arrival; refused,
// it is set aside again, at its place in submit order (first in the next
// release). Each start is counted once, in one window, so the
// fixed-window bound stays exact.
//
// Cost: one conditional write per release (per window, per rate item of
// the scope), not one per task: the released tasks' own starts then
// write nothing to the rate items.

// Reservation is the value of a released task's RateWindow: the scope
// and the opening of the window its start is counted in.
func Reservation(scope string, open time.Time) string {
	return scope + "@" + strconv.FormatInt(open.UnixNano(), 10)
}

// reserved says what t's reservation is worth in scope, whose current
// window opened at slot: counted (its start is in this window's count
// already), or a wait until its window opens. Neither: no reservation
// in scope, or it lapsed (its window ended).
func reserved(t *task.Task, scope string, slot time.Time) (counted bool, wait time.Duration) {
	open, ok := ReservedWindow(t, scope)
	switch {
	case !ok:
		return false, 0
	case open.After(slot):
		return false, open.Sub(slot)
	}
	return open.Equal(slot), 0
}

// ReservedWindow is the opening of the window t's release reserved its
// start in, if it was released for one of scope's windows.
func ReservedWindow(t *task.Task, scope string) (time.Time, bool) {
	s, at, ok := strings.Cut(t.RateWindow, "@")
	if !ok || s != scope {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}

// Reserve counts up to n starts of scope in its rate window opening at
// open, for tasks about to be released into it, and returns how many it
// counted and the reservation they carry (Reservation). A scope without a
// rate limit needs none: n and "". It is called before the window opens
// (by the window's one claimant, ClaimWindow), so only another release
// can have counted there; what the window has no room for is left held.
func (c *Controls) Reserve(ctx context.Context, scope string, open time.Time, n int) (int, string, error) {
	sc, ok := ParseScope(scope)
	if !ok || sc.Fair != "" || n <= 0 {
		return n, "", nil
	}
	var s Settings
	var err error
	if sc.Key == "" {
		s, err = c.cachedGet(ctx, sc.Type)
	} else {
		s, err = c.cachedScope(ctx, sc)
	}
	if err != nil {
		return 0, "", err
	}
	if s.RateLimitPerSecond <= 0 {
		return n, "", nil
	}
	pk, slot, _, limit := rateWindow(sc.Type, s.RateLimitPerSecond, open)
	if sc.Key == "" {
		got, err := c.reserveIn(ctx, pk, limit, n, slot)
		return got, Reservation(scope, slot), err
	}
	shards, share := rateShards(limit)
	got := 0
	for i := range shards {
		if got == n {
			break
		}
		pk := "RATE#" + scope + "#" + strconv.Itoa(i) + "#" + strconv.FormatInt(slot.UnixNano(), 10)
		k, err := c.reserveIn(ctx, pk, share(i), min(n-got, share(i)), slot)
		if err != nil {
			return got, Reservation(scope, slot), err
		}
		got += k
	}
	return got, Reservation(scope, slot), nil
}

// reserveIn adds k starts to rate item pk if they fit within limit, or
// as many as fit (one read to learn how many when k do not).
func (c *Controls) reserveIn(ctx context.Context, pk string, limit, k int, slot time.Time) (int, error) {
	for try := 0; k > 0 && try < 3; try++ {
		_, err := c.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &c.table, Key: key(pk),
			UpdateExpression:         aws.String("ADD #n :k SET #e = :exp"),
			ConditionExpression:      aws.String("attribute_not_exists(#n) OR #n <= :room"),
			ExpressionAttributeNames: map[string]string{"#n": "starts", "#e": spec.AttrTTL},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":k":    &types.AttributeValueMemberN{Value: strconv.Itoa(k)},
				":room": &types.AttributeValueMemberN{Value: strconv.Itoa(limit - k)},
				":exp":  &types.AttributeValueMemberN{Value: strconv.FormatInt(slot.Add(time.Hour).Unix(), 10)},
			},
		})
		if err == nil {
			return k, nil
		}
		if !isConditionFailed(err) {
			return 0, fmt.Errorf("reserve %d starts in %s: %w", k, pk, err)
		}
		out, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &c.table, Key: key(pk), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return 0, fmt.Errorf("read rate item %s: %w", pk, err)
		}
		used := 0
		if v, ok := out.Item["starts"].(*types.AttributeValueMemberN); ok {
			used, _ = strconv.Atoi(v.Value)
		}
		k = min(k, limit-used) // counts only grow
	}
	return 0, nil
}
