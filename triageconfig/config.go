// Package triageconfig owns triage's settings: the Config type, every
// default, the rules a setting must follow, and the TRIAGE_* variables
// that carry them. It is the one configuration of every triage process:
// package worker and the direct transport take a *Config (nil: from the
// environment), and the dispatcher's own functions, `triage dev` and the
// CDK construct read and check the same variables through it.
//
// A Config comes from code (a literal, or Decode's result with a few
// fields changed) or from the environment (FromEnv), and
// goes through the same two steps either way: WithDefaults fills what is
// unset, Validate checks the rest. The Lambda functions, `triage dev` and
// the worker all do this, and the CDK construct uses the same parsers, so
// a setting means the same thing in every place triage runs. AWS endpoints
// are never set here: the SDK reads its standard AWS_ENDPOINT_URL*
// variables itself.
//
// Zero means "unset" for every field. Where zero is also a meaningful
// value (no reserved slots, no depth limit) the field takes Off (-1) for
// it, as River's Config does; the environment's "0" decodes to Off.
package triageconfig

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
	"github.com/triagehq/triage/triagetype"
)

// Environment variable names.
const (
	EnvPrefix          = "TRIAGE_PREFIX"               // resource name prefix (default "triage")
	EnvTable           = "TRIAGE_TABLE"                // table name (default from the spec)
	EnvBucket          = "TRIAGE_BUCKET"               // S3 bucket for payloads and results over 3 KiB (default "<prefix>-blobs")
	EnvQueueURLPrefix  = "TRIAGE_QUEUE_URL_"           // + HIGH|MEDIUM|LOW: queue URL (default: looked up by name)
	EnvDLQURLPrefix    = "TRIAGE_DLQ_URL_"             // + HIGH|MEDIUM|LOW: DLQ URL (default: looked up by name)
	EnvAddr            = "TRIAGE_ADDR"                 // local listen address (default 127.0.0.1:8080)
	EnvToken           = "TRIAGE_TOKEN"                // local admin token
	EnvTokens          = "TRIAGE_TOKENS"               // extra local tokens: "token:scope+scope,token:scope"
	EnvTokensSecretARN = "TRIAGE_TOKENS_SECRET_ARN"    // Secrets Manager secret holding tokens (AWS)
	EnvWeights         = "TRIAGE_WEIGHTS"              // "high=6,medium=3,low=1"
	EnvStrict          = "TRIAGE_STRICT"               // "true": always take the highest non-empty queue
	EnvConcurrency     = "TRIAGE_CONCURRENCY"          // worker slots per consumer (default 8)
	EnvReservedHigh    = "TRIAGE_RESERVED_HIGH"        // slots only high tasks may use (default 1)
	EnvPollWait        = "TRIAGE_POLL_WAIT"            // long-poll wait when every queue is empty (default 1s)
	EnvLowAfter        = "TRIAGE_PROMOTE_LOW_AFTER"    // low -> medium after queued this long (default 10m)
	EnvMediumAfter     = "TRIAGE_PROMOTE_MEDIUM_AFTER" // medium -> high after this long at medium (default 20m)
	EnvPromoteInterval = "TRIAGE_PROMOTE_INTERVAL"     // promoter period (default 1m)
	EnvRetention       = "TRIAGE_RETENTION"            // TTL of terminal tasks (default 168h)
	EnvRoutes          = "TRIAGE_ROUTES"               // "type=arn:aws:lambda:...,type2=https://hook"
	EnvWebhookSecret   = "TRIAGE_WEBHOOK_SECRET"       // HMAC key for webhook signatures
	EnvAPIURL          = "TRIAGE_API_URL"              // the API's base URL, for the progress_url external handlers get
	EnvEventWebhooks   = "TRIAGE_EVENT_WEBHOOKS"       // lifecycle event webhooks "url,type+type=url" (stream consumer; see internal/events)
	EnvEventBus        = "TRIAGE_EVENT_BUS"            // EventBridge bus name or ARN for lifecycle events (stream consumer)
	EnvConsumerARN     = "TRIAGE_CONSUMER_FUNCTION"    // consumer function the promoter may fan out to
	EnvLogLevel        = "TRIAGE_LOG_LEVEL"            // debug|info|warn|error (default info)
	EnvLogFormat       = "TRIAGE_LOG_FORMAT"           // triage dev only: "json" puts the JSON logs on the terminal too
	EnvFanOutPer       = "TRIAGE_FANOUT_PER"           // visible messages per extra consumer the promoter starts (default 1000)
	EnvFanOutMax       = "TRIAGE_FANOUT_MAX"           // extra consumers the promoter starts per run at most (default 10)
	EnvMaxDepth        = "TRIAGE_MAX_QUEUE_DEPTH"      // submits get 429 over this queue depth (default 100000; 0: no limit)
	EnvMaxDepthHigh    = "TRIAGE_MAX_QUEUE_DEPTH_HIGH" // the same for high-priority submits (default 2 × the above)
	EnvRetryBackoff    = "TRIAGE_RETRY_BACKOFF"        // retry waits "high=1s:10s,medium=1s:30s,low=1s:60s" (base:cap per priority)
	EnvLease           = "TRIAGE_LEASE"                // a claim's lease, renewed every third of it (default 30s); bounds crash recovery
	EnvUnhandledAfter  = "TRIAGE_UNHANDLED_AFTER"      // a task whose type no live worker handled this long is dead-lettered (default 5m)
	EnvShards          = "TRIAGE_SHARDS"               // partitions per index key (default 16); may be raised, never lowered
	EnvTypeIndex       = "TRIAGE_TYPE_INDEX"           // "true": every task writes a by-type index entry (one write unit) for dense listings by type
	EnvTypes           = "TRIAGE_TYPES"                // task types the API accepts, "a,b,c" (default: any; triage dev: its handlers')
	EnvDemoHandlers    = "TRIAGE_DEMO_HANDLERS"        // "true": the consumer function also runs the demo handlers (triage dev always does)
)

// Environment variables of the metrics.
const (
	EnvMetricsAddr      = "TRIAGE_METRICS_ADDR"      // worker.Run: serve Prometheus /metrics on this address (default: not served)
	EnvMetricsNamespace = "TRIAGE_METRICS_NAMESPACE" // CloudWatch namespace of the Lambda functions' EMF metrics (default Triage)
)

// Config is every setting of a triage deployment. Each field's comment
// gives its default (applied by WithDefaults to a zero field) and its
// environment variable.
type Config struct {
	// Prefix starts every AWS resource's name: "<prefix>-tasks",
	// "<prefix>-high", ... ("triage"; TRIAGE_PREFIX).
	Prefix string
	// Table is the task table ("<Prefix>-tasks"; TRIAGE_TABLE).
	Table string
	// Bucket holds payloads and results over 3 KiB ("<Prefix>-blobs";
	// TRIAGE_BUCKET).
	Bucket string
	// QueueURLs and DLQURLs name each priority's queue and dead-letter
	// queue; a missing entry is looked up by name (TRIAGE_QUEUE_URL_HIGH,
	// TRIAGE_DLQ_URL_HIGH, ...).
	QueueURLs, DLQURLs map[triagetype.Priority]string
	// Shards is the number of partitions per index key (16; TRIAGE_SHARDS;
	// at most spec.MaxShards). It may be raised later, never lowered.
	Shards int
	// TypeIndex makes every task write a by-type index entry, so a listing
	// by type reads only that type's entries (false; TRIAGE_TYPE_INDEX).
	// Off, a task writes one write unit less and a listing by type walks
	// every task newest first, in pages that may come back short. Every
	// process that writes tasks must share it with the functions; turned
	// on later, a listing by type finds the tasks created since.
	TypeIndex bool

	// Concurrency is how many tasks one consumer runs at once (8;
	// TRIAGE_CONCURRENCY).
	Concurrency int
	// ReservedHigh of those slots run only high tasks (1; Off for none;
	// TRIAGE_RESERVED_HIGH). It must be less than Concurrency.
	ReservedHigh int
	// Weights are the weighted-polling shares (high 6, medium 3, low 1;
	// TRIAGE_WEIGHTS "high=6,medium=3,low=1"). A priority missing from a
	// non-nil map takes its default; at least one must be positive.
	Weights map[triagetype.Priority]int
	// Strict always takes the highest non-empty queue instead of polling
	// by weight (false; TRIAGE_STRICT).
	Strict bool
	// PollWait is the long-poll wait when every queue is empty (1 s;
	// TRIAGE_POLL_WAIT).
	PollWait time.Duration
	// Lease is how long a claim holds a task before a heartbeat renews it,
	// every third of it (30 s; TRIAGE_LEASE). It bounds crash recovery.
	Lease time.Duration
	// UnhandledAfter is how long a consumer without a handler for a task's
	// type hands its messages back (no attempt spent) while no live worker
	// advertises the type, before it dead-letters the task with the reason
	// (5 min; TRIAGE_UNHANDLED_AFTER). It is counted from the later of the
	// task's queueing and the last heartbeat of a worker advertising the
	// type: long enough to start one's own worker after submitting, short
	// enough that a type nobody runs does not wait for ever.
	UnhandledAfter time.Duration
	// RetryBackoff is each priority's retry wait (DefaultBackoff;
	// TRIAGE_RETRY_BACKOFF "high=1s:10s,low=1s:60s"). A priority missing
	// from a non-nil map takes its default.
	RetryBackoff map[triagetype.Priority]Backoff
	// Routes send task types to Lambda functions (an ARN) or webhooks (an
	// http(s) URL) (none; TRIAGE_ROUTES "type=target,...").
	Routes map[string]string
	// WebhookSecret is the HMAC key of webhook signatures
	// (TRIAGE_WEBHOOK_SECRET).
	WebhookSecret string
	// APIURL is the API's base address (https://…), from which the
	// consumer makes the progress_url each webhook and Lambda request
	// carries (none; TRIAGE_API_URL). Without it, handlers get only the
	// progress_token and must know the API's address themselves.
	APIURL string
	// DemoHandlers registers the demo handlers (echo, sleep, fail, noop) in
	// the consumer function (false; TRIAGE_DEMO_HANDLERS; `triage dev`
	// always does).
	DemoHandlers bool

	// Addr is `triage dev`'s listen address (127.0.0.1:8080; TRIAGE_ADDR).
	Addr string
	// Token is `triage dev`'s admin token (TRIAGE_TOKEN); Tokens adds more,
	// "token:scope+scope,..." (TRIAGE_TOKENS); TokensSecretARN names the
	// Secrets Manager secret holding the API's tokens on AWS
	// (TRIAGE_TOKENS_SECRET_ARN).
	Token, Tokens, TokensSecretARN string
	// Types, when not empty, are the only task types the API accepts: a
	// submit of another type is refused (400) instead of dead-lettered
	// later (any; TRIAGE_TYPES "a,b,c").
	Types []string
	// MaxDepth is the queue depth over which submits get 429 (100000; Off
	// for no limit; TRIAGE_MAX_QUEUE_DEPTH). MaxDepthHigh is the same for
	// high-priority submits (2 × MaxDepth; Off for no limit;
	// TRIAGE_MAX_QUEUE_DEPTH_HIGH).
	MaxDepth, MaxDepthHigh int

	// LowAfter moves a low task to medium after it waited this long (10 m;
	// TRIAGE_PROMOTE_LOW_AFTER); MediumAfter moves a medium task to high
	// after this long at medium (20 m; TRIAGE_PROMOTE_MEDIUM_AFTER).
	LowAfter, MediumAfter time.Duration
	// PromoteInterval is the promoter's period (1 m;
	// TRIAGE_PROMOTE_INTERVAL).
	PromoteInterval time.Duration
	// Retention is how long a finished task is kept (168 h;
	// TRIAGE_RETENTION).
	Retention time.Duration
	// FanOutPer is the visible messages per extra consumer the promoter
	// starts (1000; TRIAGE_FANOUT_PER), FanOutMax the most it starts per
	// run (10; Off for none; TRIAGE_FANOUT_MAX), ConsumerARN the function it starts
	// (TRIAGE_CONSUMER_FUNCTION).
	FanOutPer, FanOutMax int
	ConsumerARN          string

	// LogLevel is debug, info, warn or error (info; TRIAGE_LOG_LEVEL).
	LogLevel string

	// MetricsAddr is where a long-running worker (worker.Run) serves
	// Prometheus metrics at /metrics (not served; TRIAGE_METRICS_ADDR,
	// e.g. "127.0.0.1:9090"). MetricsNamespace is the CloudWatch namespace
	// of the Lambda functions' EMF metrics ("Triage";
	// TRIAGE_METRICS_NAMESPACE).
	MetricsAddr, MetricsNamespace string
}

// Off, in a field whose zero means "default", means none: no reserved
// slots (ReservedHigh), no depth limit (MaxDepth, MaxDepthHigh).
const Off = -1

// Defaults. Each is defined here only; the consumer, the API, the
// promoter, the worker and the CDK construct take them from here.
const (
	DefaultAddr            = "127.0.0.1:8080"
	DefaultConcurrency     = 8
	DefaultReservedHigh    = 1
	DefaultPollWait        = time.Second
	DefaultLease           = 30 * time.Second
	DefaultUnhandledAfter  = 5 * time.Minute
	DefaultLowAfter        = 10 * time.Minute
	DefaultMediumAfter     = 20 * time.Minute
	DefaultPromoteInterval = time.Minute
	DefaultRetention       = 7 * 24 * time.Hour
	DefaultMaxDepth        = 100000
	DefaultFanOutPer       = 1000
	DefaultFanOutMax       = 10
	DefaultLogLevel        = "info"
	// DefaultJitter is the share of a retry wait taken off at random.
	DefaultJitter = 0.25
)

// DefaultWeights are the weighted-polling shares: high 6, medium 3, low 1.
func DefaultWeights() map[triagetype.Priority]int {
	return map[triagetype.Priority]int{triagetype.High: 6, triagetype.Medium: 3, triagetype.Low: 1}
}

// DefaultBackoff follows the seed design's per-priority caps: high tasks
// retry within 10 s, medium within 30 s, low within 60 s.
func DefaultBackoff() map[triagetype.Priority]Backoff {
	return map[triagetype.Priority]Backoff{
		triagetype.High:   {Base: time.Second, Max: 10 * time.Second, Jitter: DefaultJitter},
		triagetype.Medium: {Base: time.Second, Max: 30 * time.Second, Jitter: DefaultJitter},
		triagetype.Low:    {Base: time.Second, Max: 60 * time.Second, Jitter: DefaultJitter},
	}
}

// Backoff is the retry wait of one priority: Base after the first failed
// attempt, doubling after each further one, never more than Max, with up
// to Jitter (a fraction, 0 for none) taken off at random so retries of
// many tasks spread out. Waits round up to whole seconds, SQS's
// granularity. With Jitter at most 0.5, each wait is longer than the one
// before until the cap is reached.
type Backoff struct {
	Base   time.Duration
	Max    time.Duration
	Jitter float64
}

// Wait returns the wait before the retry that follows failed attempt n
// (1-based).
func (b Backoff) Wait(n int, rng *rand.Rand) time.Duration {
	d := b.Base
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if b.Jitter > 0 {
		d -= time.Duration(rng.Float64() * b.Jitter * float64(d))
	}
	return (d + time.Second - 1).Truncate(time.Second)
}

// WithDefaults returns c with every unset field at its default. It
// copies the maps it fills, so c's own maps are never changed, and it is
// idempotent.
func (c Config) WithDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = spec.DefaultPrefix
	}
	sp := spec.Of(c.Prefix, c.Table, c.Bucket)
	c.Table, c.Bucket = sp.Table.Name, sp.Bucket.Name
	c.QueueURLs, c.DLQURLs = maps.Clone(c.QueueURLs), maps.Clone(c.DLQURLs)
	if c.QueueURLs == nil {
		c.QueueURLs = map[triagetype.Priority]string{}
	}
	if c.DLQURLs == nil {
		c.DLQURLs = map[triagetype.Priority]string{}
	}
	setInt(&c.Shards, spec.DefaultShards)
	setInt(&c.Concurrency, DefaultConcurrency)
	setInt(&c.ReservedHigh, DefaultReservedHigh)
	c.Weights = fill(c.Weights, DefaultWeights())
	c.RetryBackoff = fill(c.RetryBackoff, DefaultBackoff())
	setDur(&c.PollWait, DefaultPollWait)
	setDur(&c.Lease, DefaultLease)
	setDur(&c.UnhandledAfter, DefaultUnhandledAfter)
	if c.Routes == nil {
		c.Routes = map[string]string{}
	}
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	setInt(&c.MaxDepth, DefaultMaxDepth)
	if c.MaxDepthHigh == 0 {
		c.MaxDepthHigh = Off
		if c.MaxDepth > 0 {
			c.MaxDepthHigh = 2 * c.MaxDepth
		}
	}
	setDur(&c.LowAfter, DefaultLowAfter)
	setDur(&c.MediumAfter, DefaultMediumAfter)
	setDur(&c.PromoteInterval, DefaultPromoteInterval)
	setDur(&c.Retention, DefaultRetention)
	setInt(&c.FanOutPer, DefaultFanOutPer)
	setInt(&c.FanOutMax, DefaultFanOutMax)
	if c.LogLevel == "" {
		c.LogLevel = DefaultLogLevel
	}
	return c
}

func setInt(p *int, def int) {
	if *p == 0 {
		*p = def
	}
}

func setDur(p *time.Duration, def time.Duration) {
	if *p == 0 {
		*p = def
	}
}

// fill returns a copy of m with def's entries for the priorities m lacks
// (def itself when m is nil).
func fill[V any](m, def map[triagetype.Priority]V) map[triagetype.Priority]V {
	if m == nil {
		return def
	}
	out := maps.Clone(m)
	for p, v := range def {
		if _, set := out[p]; !set {
			out[p] = v
		}
	}
	return out
}

// Error is a setting that breaks its rule. It names the field and
// the variable that sets it, so the message helps whichever was used.
type Error struct {
	Field string // Go field name, e.g. "ReservedHigh"
	Env   string // its variable, e.g. "TRIAGE_RESERVED_HIGH"
	Msg   string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%s): %s", e.Field, e.Env, e.Msg) }

// Validate checks every setting. Call it on a Config after WithDefaults:
// it reads zero values as given, not as unset. The first broken rule is
// returned as a *Error.
func (c Config) Validate() error {
	bad := func(field, env, format string, args ...any) error {
		return &Error{Field: field, Env: env, Msg: fmt.Sprintf(format, args...)}
	}
	if c.APIURL != "" {
		if u, err := url.Parse(c.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return bad("APIURL", EnvAPIURL, "%q is not an http(s) URL such as https://abc.execute-api.us-east-1.amazonaws.com", c.APIURL)
		}
	}
	for _, v := range []struct {
		field, env string
		n, min     int
	}{
		{"Shards", EnvShards, c.Shards, 1},
		{"Concurrency", EnvConcurrency, c.Concurrency, 1},
		{"ReservedHigh", EnvReservedHigh, c.ReservedHigh, Off},
		{"MaxDepth", EnvMaxDepth, c.MaxDepth, Off},
		{"MaxDepthHigh", EnvMaxDepthHigh, c.MaxDepthHigh, Off},
		{"FanOutPer", EnvFanOutPer, c.FanOutPer, 1},
		{"FanOutMax", EnvFanOutMax, c.FanOutMax, Off},
	} {
		if v.n < v.min {
			return bad(v.field, v.env, "must be at least %d, got %d", v.min, v.n)
		}
	}
	if c.Shards > spec.MaxShards {
		return bad("Shards", EnvShards, "must be at most %d, got %d", spec.MaxShards, c.Shards)
	}
	if c.ReservedHigh >= c.Concurrency {
		return bad("ReservedHigh", EnvReservedHigh, "must be less than Concurrency (%d), got %d", c.Concurrency, c.ReservedHigh)
	}
	for _, v := range []struct {
		field, env string
		d          time.Duration
	}{
		{"PollWait", EnvPollWait, c.PollWait}, {"Lease", EnvLease, c.Lease}, {"UnhandledAfter", EnvUnhandledAfter, c.UnhandledAfter},
		{"LowAfter", EnvLowAfter, c.LowAfter}, {"MediumAfter", EnvMediumAfter, c.MediumAfter},
		{"PromoteInterval", EnvPromoteInterval, c.PromoteInterval}, {"Retention", EnvRetention, c.Retention},
	} {
		if v.d <= 0 {
			return bad(v.field, v.env, "must be a positive duration, got %s", v.d)
		}
	}
	if err := CheckWeights(c.Weights); err != nil {
		return bad("Weights", EnvWeights, "%v", err)
	}
	for p, b := range c.RetryBackoff {
		if err := p.Validate(); err != nil {
			return bad("RetryBackoff", EnvRetryBackoff, "%v", err)
		}
		if err := b.check(); err != nil {
			return bad("RetryBackoff", EnvRetryBackoff, "%s: %v", p, err)
		}
	}
	for _, urls := range []struct {
		field string
		m     map[triagetype.Priority]string
	}{{"QueueURLs", c.QueueURLs}, {"DLQURLs", c.DLQURLs}} {
		for p := range urls.m {
			if err := p.Validate(); err != nil {
				return bad(urls.field, EnvQueueURLPrefix+"*", "%v", err)
			}
		}
	}
	for _, typ := range c.Types {
		if err := task.ValidateType(typ); err != nil {
			return bad("Types", EnvTypes, "type %q %v", typ, err)
		}
	}
	for typ, target := range c.Routes {
		if err := CheckRoute(typ, target); err != nil {
			return bad("Routes", EnvRoutes, "%v", err)
		}
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		return bad("LogLevel", EnvLogLevel, "must be debug, info, warn or error, got %q", c.LogLevel)
	}
	return nil
}

func (b Backoff) check() error {
	switch {
	case b.Base <= 0:
		return fmt.Errorf("base must be positive, got %s", b.Base)
	case b.Max < b.Base:
		return fmt.Errorf("cap %s is below base %s", b.Max, b.Base)
	case b.Jitter < 0 || b.Jitter > 0.5:
		return fmt.Errorf("jitter must be from 0 to 0.5, got %g", b.Jitter)
	}
	return nil
}

// Load is how a program that embeds triage (package worker, the direct
// transport) configures it: c, or when c is nil the process environment
// (Decode(os.Getenv)), then WithDefaults and Validate. c is not changed.
func Load(c *Config) (Config, error) {
	if c == nil {
		return FromEnv(os.Getenv)
	}
	cfg := c.WithDefaults()
	return cfg, cfg.Validate()
}

// FromEnv is how a triage process configures itself: Decode through
// getenv (os.Getenv when nil), then WithDefaults and Validate.
func FromEnv(getenv func(string) string) (Config, error) {
	c, err := Decode(getenv)
	if err != nil {
		return c, err
	}
	c = c.WithDefaults()
	return c, c.Validate()
}

// Decode reads the TRIAGE_* variables through getenv (os.Getenv when nil)
// into a Config and nothing more: a variable that is not set leaves its
// field unset, and no default or cross-field rule is applied (see
// WithDefaults and Validate). A value that does not parse is an error
// naming its variable. For ReservedHigh and the depth limits, "0" decodes
// to Off.
func Decode(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{
		Prefix:          getenv(EnvPrefix),
		Table:           getenv(EnvTable),
		Bucket:          getenv(EnvBucket),
		Addr:            getenv(EnvAddr),
		Token:           getenv(EnvToken),
		Tokens:          getenv(EnvTokens),
		TokensSecretARN: getenv(EnvTokensSecretARN),
		WebhookSecret:   getenv(EnvWebhookSecret),
		APIURL:          getenv(EnvAPIURL),
		ConsumerARN:     getenv(EnvConsumerARN),
		LogLevel:        strings.ToLower(getenv(EnvLogLevel)),
	}
	c.MetricsAddr, c.MetricsNamespace = getenv(EnvMetricsAddr), getenv(EnvMetricsNamespace)
	for _, p := range triagetype.Priorities() {
		up := strings.ToUpper(string(p))
		if u := getenv(EnvQueueURLPrefix + up); u != "" {
			c.QueueURLs = setKey(c.QueueURLs, p, u)
		}
		if u := getenv(EnvDLQURLPrefix + up); u != "" {
			c.DLQURLs = setKey(c.DLQURLs, p, u)
		}
	}
	var err error
	if c.Weights, err = ParseWeights(getenv(EnvWeights)); err != nil {
		return c, fmt.Errorf("%s: %w", EnvWeights, err)
	}
	if c.Strict, err = parseBool(getenv(EnvStrict)); err != nil {
		return c, fmt.Errorf("%s: %w", EnvStrict, err)
	}
	if c.DemoHandlers, err = parseBool(getenv(EnvDemoHandlers)); err != nil {
		return c, fmt.Errorf("%s: %w", EnvDemoHandlers, err)
	}
	if c.TypeIndex, err = parseBool(getenv(EnvTypeIndex)); err != nil {
		return c, fmt.Errorf("%s: %w", EnvTypeIndex, err)
	}
	ints := []struct {
		name    string
		dst     *int
		zeroOff bool // "0" means none: decodes to Off
	}{
		{EnvConcurrency, &c.Concurrency, false},
		{EnvReservedHigh, &c.ReservedHigh, true},
		{EnvMaxDepth, &c.MaxDepth, true},
		{EnvMaxDepthHigh, &c.MaxDepthHigh, true},
		{EnvFanOutPer, &c.FanOutPer, false},
		{EnvFanOutMax, &c.FanOutMax, true},
		{EnvShards, &c.Shards, false},
	}
	for _, v := range ints {
		s := getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		switch {
		case err != nil || n < 0:
			return c, fmt.Errorf("%s: want a whole number >= 0, got %q", v.name, s)
		case n == 0 && v.zeroOff:
			n = Off
		case n == 0:
			return c, fmt.Errorf("%s: want a whole number >= 1, got %q", v.name, s)
		}
		*v.dst = n
	}
	durs := []struct {
		name string
		dst  *time.Duration
	}{
		{EnvPollWait, &c.PollWait},
		{EnvLowAfter, &c.LowAfter},
		{EnvMediumAfter, &c.MediumAfter},
		{EnvPromoteInterval, &c.PromoteInterval},
		{EnvRetention, &c.Retention},
		{EnvLease, &c.Lease},
		{EnvUnhandledAfter, &c.UnhandledAfter},
	}
	for _, v := range durs {
		if *v.dst, err = parseDuration(getenv(v.name)); err != nil {
			return c, fmt.Errorf("%s: %w", v.name, err)
		}
	}
	for _, typ := range strings.Split(getenv(EnvTypes), ",") {
		if typ = strings.TrimSpace(typ); typ != "" {
			c.Types = append(c.Types, typ)
		}
	}
	if c.Routes, err = ParseRoutes(getenv(EnvRoutes)); err != nil {
		return c, fmt.Errorf("%s: %w", EnvRoutes, err)
	}
	if c.RetryBackoff, err = ParseBackoff(getenv(EnvRetryBackoff)); err != nil {
		return c, fmt.Errorf("%s: %w", EnvRetryBackoff, err)
	}
	return c, nil
}

func setKey(m map[triagetype.Priority]string, p triagetype.Priority, v string) map[triagetype.Priority]string {
	if m == nil {
		m = map[triagetype.Priority]string{}
	}
	m[p] = v
	return m
}

// ParseBackoff parses "high=1s:10s,low=2s:2m": per priority, the retry wait
// after the first failure and its cap, with DefaultJitter. Only the
// priorities named are in the result.
func ParseBackoff(s string) (map[triagetype.Priority]Backoff, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	out := map[triagetype.Priority]Backoff{}
	err := eachPriority(s, "priority=base:cap", func(p triagetype.Priority, v string) error {
		base, limit, ok := strings.Cut(v, ":")
		if !ok {
			return fmt.Errorf("retry backoff of %s: %q is not base:cap, such as 1s:30s", p, v)
		}
		b := Backoff{Jitter: DefaultJitter}
		var err error
		if b.Base, err = parseDuration(base); err != nil || b.Base == 0 {
			return fmt.Errorf("retry backoff base of %s: %w", p, orMissing(err))
		}
		if b.Max, err = parseDuration(limit); err != nil || b.Max == 0 {
			return fmt.Errorf("retry backoff cap of %s: %w", p, orMissing(err))
		}
		if err := b.check(); err != nil {
			return fmt.Errorf("retry backoff of %s: %w", p, err)
		}
		out[p] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func orMissing(err error) error {
	if err == nil {
		return errors.New("missing")
	}
	return err
}

// eachPriority calls fn with each pair of a "priority=value,..." list,
// value trimmed; form names the pair's shape in errors.
func eachPriority(s, form string, fn func(triagetype.Priority, string) error) error {
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("%q is not %s", part, form)
		}
		p, err := triagetype.ParsePriority(strings.TrimSpace(k))
		if err != nil {
			return err
		}
		if err := fn(p, strings.TrimSpace(v)); err != nil {
			return err
		}
	}
	return nil
}

// ParseWeights parses "high=6,medium=3,low=1". Only the priorities named
// are in the result (WithDefaults gives the others their default); nil
// for "".
func ParseWeights(s string) (map[triagetype.Priority]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	w := map[triagetype.Priority]int{}
	err := eachPriority(s, "priority=weight", func(p triagetype.Priority, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return fmt.Errorf("weight of %s must be a whole number >= 0, got %q", p, v)
		}
		w[p] = n
		return nil
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

// CheckWeights is the rule weights follow: known priorities, none
// negative, at least one positive.
func CheckWeights(w map[triagetype.Priority]int) error {
	sum := 0
	for p, n := range w {
		if err := p.Validate(); err != nil {
			return err
		}
		if n < 0 {
			return fmt.Errorf("weight of %s must be a whole number >= 0, got %d", p, n)
		}
		sum += n
	}
	if sum == 0 {
		return fmt.Errorf("at least one weight must be positive")
	}
	return nil
}

// ParseRoutes parses "type=target,type2=target2" where a target is a Lambda
// ARN (arn:aws:lambda:...) or an http(s) URL (see CheckRoute).
func ParseRoutes(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	r := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%q is not type=target", part)
		}
		if err := CheckRoute(k, v); err != nil {
			return nil, err
		}
		r[k] = v
	}
	return r, nil
}

// CheckRoute is the rule a route follows: a task type the API accepts,
// and a target that is a Lambda ARN or an http(s) URL.
func CheckRoute(typ, target string) error {
	if err := task.ValidateType(typ); err != nil {
		return fmt.Errorf("route %q: type %v", typ, err)
	}
	if !strings.HasPrefix(target, "arn:") && !strings.HasPrefix(target, "http://") && !strings.HasPrefix(target, "https://") {
		return fmt.Errorf("route %s: target %q is neither a Lambda ARN nor an http(s) URL", typ, target)
	}
	return nil
}

func parseBool(s string) (bool, error) {
	if s == "" {
		return false, nil
	}
	return strconv.ParseBool(s)
}

// parseDuration reads a positive duration; "" is 0 (unset).
func parseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want a positive duration such as 30s or 10m, got %q", s)
	}
	return d, nil
}
