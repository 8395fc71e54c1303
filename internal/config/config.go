// Package config reads triage's runtime settings from the environment.
//
// The three Lambda functions and `triage dev` read the same variables, so a
// setting means the same thing locally and in AWS. The CDK construct in
// infra/ sets these variables on the functions. AWS endpoints are never set
// here: the SDK reads its standard AWS_ENDPOINT_URL* variables itself.
package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/internal/task"
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
	EnvShards          = "TRIAGE_SHARDS"               // partitions per index key (default 16); may be raised, never lowered
	EnvTypes           = "TRIAGE_TYPES"                // task types the API accepts, "a,b,c" (default: any; triage dev: its handlers')
	EnvDemoHandlers    = "TRIAGE_DEMO_HANDLERS"        // "true": the consumer function also runs the demo handlers (triage dev always does)
)

// Config is the parsed environment.
type Config struct {
	Spec            spec.Spec
	QueueURLs       map[task.Priority]string // empty entries are looked up by name
	DLQURLs         map[task.Priority]string
	Addr            string
	Token           string
	Tokens          string
	TokensSecretARN string
	Weights         map[task.Priority]int
	Strict          bool
	DemoHandlers    bool // register the demo handlers (echo, sleep, fail, noop) in the consumer
	Concurrency     int
	ReservedHigh    int
	PollWait        time.Duration
	Lease           time.Duration // 0: the consumer's default (dispatch.DefaultLease)
	Shards          int           // partitions per index key (spec.DefaultShards)
	// Types, when not empty, are the only task types the API accepts; a
	// submit of another type is refused (400) instead of dead-lettered later.
	Types           []string
	LowAfter        time.Duration
	MediumAfter     time.Duration
	PromoteInterval time.Duration
	Retention       time.Duration
	Routes          map[string]string
	WebhookSecret   string
	ConsumerARN     string
	LogLevel        string
	MaxDepth        int
	MaxDepthHigh    int
	FanOutPer       int
	FanOutMax       int
	// RetryBackoff holds the priorities whose retry waits TRIAGE_RETRY_BACKOFF
	// sets; the others keep the consumer's defaults.
	RetryBackoff map[task.Priority]Backoff
}

// Backoff is one priority's retry wait: Base after the first failed
// attempt, doubling after each further one, never more than Max.
type Backoff struct {
	Base time.Duration
	Max  time.Duration
}

// Defaults.
const (
	DefaultAddr            = "127.0.0.1:8080"
	DefaultConcurrency     = 8
	DefaultReservedHigh    = 1
	DefaultPollWait        = time.Second
	DefaultLowAfter        = 10 * time.Minute
	DefaultMediumAfter     = 20 * time.Minute
	DefaultPromoteInterval = time.Minute
	DefaultRetention       = 7 * 24 * time.Hour
	DefaultMaxDepth        = 100000
)

// DefaultWeights are the weighted-polling shares: high 6, medium 3, low 1.
func DefaultWeights() map[task.Priority]int {
	return map[task.Priority]int{task.High: 6, task.Medium: 3, task.Low: 1}
}

// FromEnv reads the configuration through getenv (os.Getenv in production).
// Every malformed value is an error naming its variable.
func FromEnv(getenv func(string) string) (Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	c := Config{
		Spec:            spec.New(getenv(EnvPrefix)),
		QueueURLs:       map[task.Priority]string{},
		DLQURLs:         map[task.Priority]string{},
		Addr:            orDefault(getenv(EnvAddr), DefaultAddr),
		Token:           getenv(EnvToken),
		Tokens:          getenv(EnvTokens),
		TokensSecretARN: getenv(EnvTokensSecretARN),
		WebhookSecret:   getenv(EnvWebhookSecret),
		ConsumerARN:     getenv(EnvConsumerARN),
		LogLevel:        orDefault(getenv(EnvLogLevel), "info"),
	}
	if t := getenv(EnvTable); t != "" {
		c.Spec.Table.Name = t
	}
	if b := getenv(EnvBucket); b != "" {
		c.Spec.Bucket.Name = b
	}
	for _, p := range task.Priorities() {
		up := strings.ToUpper(string(p))
		c.QueueURLs[p] = getenv(EnvQueueURLPrefix + up)
		c.DLQURLs[p] = getenv(EnvDLQURLPrefix + up)
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
	ints := []struct {
		name string
		dst  *int
		def  int
	}{
		{EnvConcurrency, &c.Concurrency, DefaultConcurrency},
		{EnvReservedHigh, &c.ReservedHigh, DefaultReservedHigh},
		{EnvMaxDepth, &c.MaxDepth, DefaultMaxDepth},
		{EnvFanOutPer, &c.FanOutPer, 1000},
		{EnvFanOutMax, &c.FanOutMax, 10},
		{EnvMaxDepthHigh, &c.MaxDepthHigh, 0},
		{EnvShards, &c.Shards, spec.DefaultShards},
	}
	for _, v := range ints {
		if *v.dst, err = parseInt(getenv(v.name), v.def); err != nil {
			return c, fmt.Errorf("%s: %w", v.name, err)
		}
	}
	if getenv(EnvMaxDepthHigh) == "" {
		c.MaxDepthHigh = 2 * c.MaxDepth
	}
	if c.Shards < 1 || c.Shards > spec.MaxShards {
		return c, fmt.Errorf("%s must be from 1 to %d, got %d", EnvShards, spec.MaxShards, c.Shards)
	}
	if c.ReservedHigh >= c.Concurrency {
		return c, fmt.Errorf("%s (%d) must be less than %s (%d)", EnvReservedHigh, c.ReservedHigh, EnvConcurrency, c.Concurrency)
	}
	durs := []struct {
		name string
		dst  *time.Duration
		def  time.Duration
	}{
		{EnvPollWait, &c.PollWait, DefaultPollWait},
		{EnvLowAfter, &c.LowAfter, DefaultLowAfter},
		{EnvMediumAfter, &c.MediumAfter, DefaultMediumAfter},
		{EnvPromoteInterval, &c.PromoteInterval, DefaultPromoteInterval},
		{EnvRetention, &c.Retention, DefaultRetention},
		{EnvLease, &c.Lease, 0},
	}
	for _, v := range durs {
		if *v.dst, err = parseDuration(getenv(v.name), v.def); err != nil {
			return c, fmt.Errorf("%s: %w", v.name, err)
		}
	}
	for _, typ := range strings.Split(getenv(EnvTypes), ",") {
		if typ = strings.TrimSpace(typ); typ != "" {
			if err := task.ValidateType(typ); err != nil {
				return c, fmt.Errorf("%s: type %q %v", EnvTypes, typ, err)
			}
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

// ParseBackoff parses "high=1s:10s,low=2s:2m": per priority, the retry wait
// after the first failure and its cap. Only the priorities named are in
// the result.
func ParseBackoff(s string) (map[task.Priority]Backoff, error) {
	out := map[task.Priority]Backoff{}
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	err := eachPriority(s, "priority=base:cap", func(p task.Priority, v string) error {
		base, limit, ok := strings.Cut(v, ":")
		if !ok {
			return fmt.Errorf("retry backoff of %s: %q is not base:cap, such as 1s:30s", p, v)
		}
		var b Backoff
		var err error
		if b.Base, err = parseDuration(base, 0); err != nil {
			return fmt.Errorf("retry backoff base of %s: %w", p, err)
		}
		if b.Max, err = parseDuration(limit, 0); err != nil {
			return fmt.Errorf("retry backoff cap of %s: %w", p, err)
		}
		if b.Max < b.Base {
			return fmt.Errorf("retry backoff of %s: cap %s is below base %s", p, b.Max, b.Base)
		}
		out[p] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachPriority calls fn with each pair of a "priority=value,..." list,
// value trimmed; form names the pair's shape in errors.
func eachPriority(s, form string, fn func(task.Priority, string) error) error {
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("%q is not %s", part, form)
		}
		p, err := task.ParsePriority(strings.TrimSpace(k))
		if err != nil {
			return err
		}
		if err := fn(p, strings.TrimSpace(v)); err != nil {
			return err
		}
	}
	return nil
}

// ParseWeights parses "high=6,medium=3,low=1". Missing priorities keep their default.
func ParseWeights(s string) (map[task.Priority]int, error) {
	w := DefaultWeights()
	if strings.TrimSpace(s) == "" {
		return w, nil
	}
	err := eachPriority(s, "priority=weight", func(p task.Priority, v string) error {
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
	return w, checkWeights(w)
}

// WeightsFrom is ParseWeights for weights given in code, by priority name:
// the same rules, the same defaults for missing priorities.
func WeightsFrom(m map[string]int) (map[task.Priority]int, error) {
	w := DefaultWeights()
	for name, n := range m {
		p, err := task.ParsePriority(name)
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, fmt.Errorf("weight of %s must be a whole number >= 0, got %d", p, n)
		}
		w[p] = n
	}
	return w, checkWeights(w)
}

func checkWeights(w map[task.Priority]int) error {
	if w[task.High]+w[task.Medium]+w[task.Low] == 0 {
		return fmt.Errorf("at least one weight must be positive")
	}
	return nil
}

// ParseRoutes parses "type=target,type2=target2" where a target is a Lambda
// ARN (arn:aws:lambda:...) or an http(s) URL.
func ParseRoutes(s string) (map[string]string, error) {
	r := map[string]string{}
	if strings.TrimSpace(s) == "" {
		return r, nil
	}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%q is not type=target", part)
		}
		if !strings.HasPrefix(v, "arn:") && !strings.HasPrefix(v, "http://") && !strings.HasPrefix(v, "https://") {
			return nil, fmt.Errorf("route %s: target %q is neither a Lambda ARN nor an http(s) URL", k, v)
		}
		r[k] = v
	}
	return r, nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func parseBool(s string) (bool, error) {
	if s == "" {
		return false, nil
	}
	return strconv.ParseBool(s)
}

func parseInt(s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("want a whole number >= 0, got %q", s)
	}
	return n, nil
}

func parseDuration(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want a positive duration such as 30s or 10m, got %q", s)
	}
	return d, nil
}
