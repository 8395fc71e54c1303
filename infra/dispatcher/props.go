package dispatcher

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/triagehq/triage/internal/spec"
	"github.com/triagehq/triage/triageconfig"
)

// Props configures a Dispatcher. The zero value is a working deployment
// named "triage".
//
// Settings the functions read from the environment (weights, thresholds,
// concurrency, ...) are only set when given: zero means "the function's own
// default" from triageconfig, so the defaults live in one place and the
// construct never disagrees with `triage dev`.
type Props struct {
	// Prefix names the deployment: with PhysicalNames it starts every
	// resource name (the table "<prefix>-tasks", the queues
	// "<prefix>-high", ..., the functions "<prefix>-api", ...); it always
	// names the HTTP API ("<prefix>-api"), appears in descriptions and is
	// passed to the functions as TRIAGE_PREFIX. Default "triage" (the
	// spec's default).
	Prefix string
	// PhysicalNames gives the table, the queues and DLQs and the four
	// functions fixed names made from Prefix, as `triage dev` and the
	// direct producer's look-up by prefix expect. Default false:
	// CloudFormation generates the names (the CDK convention), so the
	// construct can be deployed to one account and region under any number
	// of stacks, and a change that replaces a resource never fails on a
	// name that is taken. Every function finds every resource through its
	// TRIAGE_* environment either way, and so do producers and consumers
	// given ProducerEnvironment or ConsumerEnvironment.
	//
	// A deployment made with fixed names (this repository's TriageStack,
	// and any stack synthesized before this setting existed) must keep it
	// true: turning it off renames the resources, which CloudFormation does
	// by replacing them — a new, empty table (a retained old one is left
	// behind with its tasks), new queues (their messages are lost) and new
	// functions.
	PhysicalNames bool

	// Weights are the weighted-polling shares by priority name ("high",
	// "medium", "low"). Missing priorities keep the consumer's default
	// (high 6, medium 3, low 1).
	Weights map[string]int
	// Strict makes the consumer always take the highest non-empty queue.
	Strict bool
	// DemoHandlers makes the stock consumer also run the demo handlers
	// (echo, sleep, fail, noop): for trying a deployment out, never for
	// production.
	DemoHandlers bool

	// Retry sets retry waits by priority name: Base is the wait after a
	// task's first failed attempt, doubling after each further failure up
	// to Max, less up to 25 % jitter. Missing priorities keep the
	// consumer's defaults (base 1s; cap high 10s, medium 30s, low 60s).
	// How many attempts a task gets is its own max_attempts (default 3).
	Retry map[string]RetryBackoff

	// Shards is how many partitions each index key is spread over (default
	// 16, from 1 to 256). Each shard takes up to 1,000 write units a second,
	// and every task writes one entry per index, so one task type at one
	// priority reaches about 1,000 × Shards tasks/s before any key is at its
	// limit. It may be raised later, never lowered.
	Shards int
	// TypeIndex makes every task write an entry to the table's by-type
	// index (TRIAGE_TYPE_INDEX), so a listing by type reads that type's
	// tasks only. Off (the default) a task writes one write unit less
	// ($0.625 a million tasks on demand) and a listing by type walks all
	// tasks newest first, in pages that may come back short with a cursor.
	// Turned on later, listings by type find the tasks created since.
	TypeIndex bool
	// Types, if set, are the only task types the API accepts (TRIAGE_TYPES);
	// a submit of another type is refused with 400. Empty: any type.
	Types []string
	// Schedules are periodic tasks created (or replaced) at deploy time,
	// and deleted when removed from the list or with the stack; the
	// promoter starts each at its first tick after the deploy. Each is
	// checked at synth: a bad cron, zone or type is an error naming it.
	Schedules []Schedule

	// PromoteLowAfter is how long a task waits at low before it moves to
	// medium (consumer default 10m).
	PromoteLowAfter time.Duration
	// PromoteMediumAfter is how long a task waits at medium before it moves
	// to high (default 20m).
	PromoteMediumAfter time.Duration
	// PromoteInterval is the promoter's schedule. EventBridge rates are whole
	// minutes, so it is rounded up to one; default and minimum 1m. It is also
	// passed to the promoter so its guarantee (thresholds plus one interval)
	// is computed from the real period.
	PromoteInterval time.Duration

	// Retention is how long terminal tasks are kept before DynamoDB's TTL
	// removes them (function default 168h).
	Retention time.Duration

	// Concurrency is the number of worker slots per consumer invocation
	// (default 8) and ReservedHigh how many of them only high-priority tasks
	// may use (default 1; triageconfig.Off for none). ReservedHigh must stay
	// below Concurrency.
	Concurrency  int
	ReservedHigh int
	// PollWait is the consumer's long-poll wait when every queue is empty
	// (default 1s).
	PollWait time.Duration
	// Scheduled opts in to the always-polling consumer: an every-minute
	// schedule starts FanOut consumer instances, each polling until 40 s
	// before its deadline whether or not there is work, and the promoter
	// may start more when the backlog grows. Idle, that is about 4.3
	// instances of the default 512 MB consumer always running: about $76 a
	// month of Lambda time and $14 of empty receives (see the README's
	// cost section). Default false: the queues start the consumer through
	// SQS event source mappings (Mapping) and nothing runs while nothing
	// is queued.
	Scheduled bool
	// FanOut is how many consumer instances the every-minute schedule
	// starts with Scheduled (default 1, at most MaxFanOut).
	FanOut int
	// Mapping sets the queues' event source mappings to the consumer
	// (without Scheduled).
	Mapping MappingProps

	// Routes map a task type to its handler: a Lambda function ARN (a
	// literal "arn:..." or a token such as fn.FunctionArn()) or an http(s)
	// webhook URL. The consumer may invoke exactly these Lambda ARNs.
	Routes map[string]string
	// WebhookSecret is the HMAC key that signs webhook bodies. Prefer
	// awscdk.SecretValue_SecretsManager, which the template carries as a
	// dynamic reference rather than as plain text. Optional.
	WebhookSecret awscdk.SecretValue
	// Events opts in to lifecycle events on EventBridge (internal/events):
	// the construct creates a bus (Dispatcher.EventBus) unless EventBus is
	// set, and the counters function, which reads the table's stream, puts
	// every task.* event on it with source "triage" and detail-type the
	// event type. Users add rules to the bus. Default false: no bus, no
	// grant.
	Events bool
	// EventBus, with Events, is an existing bus to put the events on.
	EventBus awsevents.IEventBus
	// EventWebhooks is TRIAGE_EVENT_WEBHOOKS for the counters function:
	// URLs that receive every event (or "type+type=url" for some), signed
	// with WebhookSecret, which must then be set.
	EventWebhooks string
	// TokensSecret, when set, is a Secrets Manager secret with more API
	// bearer tokens, which the API reads at its start. Nil (the default):
	// no secret; the API's tokens are the ones minted into the table with
	// `triage tokens create` (kept as SHA-256 hashes), which cost nothing
	// idle where a secret costs $0.40 a month.
	TokensSecret awssecretsmanager.ISecret
	// IAMAuth puts AWS IAM (SigV4) authorization on every API route, in
	// front of the function's bearer-token check.
	IAMAuth bool

	// Alarms tunes the CloudWatch alarms.
	Alarms AlarmProps
	// Metrics tunes the dashboard and the alarms on triage's own metrics.
	Metrics MetricsProps

	// LogLevel is the functions' log level: debug, info, warn or error
	// (function default info).
	LogLevel string
	// LogRetention is how long the functions' logs are kept. Default one month.
	LogRetention awslogs.RetentionDays
	// Provisioned, when set, bills the table and its indexes by provisioned
	// capacity under auto scaling instead of on demand (nil): cheaper per
	// task under a steady load (bench group 5 prices both at 70 %
	// utilisation), dearer when idle (the minimum units are paid every
	// hour) and slower to follow a burst than on-demand.
	Provisioned *ProvisionedProps
	// RemovalPolicy applies to the table and the generated tokens secret,
	// the two resources holding state. Default RETAIN.
	RemovalPolicy awscdk.RemovalPolicy

	// API, Consumer, Promoter and Counters size the four functions.
	// Counters keeps the /stats counters from the table's stream.
	API, Consumer, Promoter, Counters FunctionProps

	// ConsumerPackage is the Go package built as the consumer function's
	// bootstrap: a main package, named as `go build` takes it in SourceRoot,
	// by import path or relative to SourceRoot ("./cmd/consumer"). Default
	// DefaultConsumerPackage, the stock consumer (Routes; the demo handlers
	// only with TRIAGE_DEMO_HANDLERS=true).
	// Set it to your own main built on the worker package
	// (github.com/triagehq/triage/worker, served with worker.StartLambda)
	// to run Go handlers; the function keeps the consumer's environment,
	// event source mappings (or schedule, with Scheduled), permissions and
	// alarms, and answers SQS events with their batch item failures as the
	// stock consumer does.
	ConsumerPackage string

	// SourceRoot is the root of the Go module where `go build` runs: the
	// API and promoter (and the default consumer) are built by import path
	// (RootModule + "/functions/..."), so it may be this repository or any
	// module whose build list includes RootModule, e.g. your own module that
	// requires it and holds ConsumerPackage. Default: the nearest directory
	// at or above the working directory whose go.mod declares RootModule
	// (see FindRepoRoot); outside this repository, set it.
	SourceRoot string
	// BuildLog receives one line per built function with its size. Default
	// os.Stderr.
	BuildLog io.Writer
}

// MappingProps are the settings of each priority queue's SQS event source
// mapping to the consumer function. Zero values get spec.DefaultMapping's.
type MappingProps struct {
	// BatchSize is the most messages one invocation is handed (1 to 10;
	// default 5, within the default consumer's general slots). The
	// invocation then polls all three queues by weight while there is
	// work, so the batch size only shapes the first receive.
	BatchSize int
	// Window is how long Lambda gathers messages before it invokes (0 to
	// 5 min; default 0: at once, so a task sent to an idle deployment
	// starts soonest).
	Window time.Duration
	// MaxConcurrency bounds the invocations each mapping keeps running (2
	// to 1000; default 5): at most 3 × MaxConcurrency consumers run, each
	// with Concurrency slots. Every invocation polls by weight and keeps
	// ReservedHigh slots for high tasks, so with backlogs on both low and
	// high, high work still takes its weighted share (6 of 10 receives by
	// default) and the reserved slots of every running consumer.
	MaxConcurrency int
}

// ProvisionedProps set provisioned capacity with auto scaling for the table
// and each of its indexes. Zero values get the defaults in parentheses.
type ProvisionedProps struct {
	// MinRead and MaxRead bound the read capacity units auto scaling sets
	// (5 and 1000); MinWrite and MaxWrite the write capacity units (5 and
	// 1000). Each index gets the same bounds as the table.
	MinRead, MaxRead   int
	MinWrite, MaxWrite int
	// TargetUtilizationPercent is the share of the provisioned units auto
	// scaling keeps in use (70; 20 to 90).
	TargetUtilizationPercent int
}

// Provisioned capacity defaults.
const (
	defaultProvisionedMin    = 5
	defaultProvisionedMax    = 1000
	defaultProvisionedTarget = 70
)

// withDefaults fills the zero fields of p and checks the bounds.
func (p ProvisionedProps) withDefaults() (ProvisionedProps, error) {
	for _, f := range []*int{&p.MinRead, &p.MinWrite} {
		if *f == 0 {
			*f = defaultProvisionedMin
		}
	}
	for _, f := range []*int{&p.MaxRead, &p.MaxWrite} {
		if *f == 0 {
			*f = defaultProvisionedMax
		}
	}
	if p.TargetUtilizationPercent == 0 {
		p.TargetUtilizationPercent = defaultProvisionedTarget
	}
	switch {
	case p.MinRead < 1 || p.MaxRead < p.MinRead:
		return p, fmt.Errorf("Provisioned read capacity %d to %d: the minimum must be at least 1 and at most the maximum", p.MinRead, p.MaxRead)
	case p.MinWrite < 1 || p.MaxWrite < p.MinWrite:
		return p, fmt.Errorf("Provisioned write capacity %d to %d: the minimum must be at least 1 and at most the maximum", p.MinWrite, p.MaxWrite)
	case p.TargetUtilizationPercent < 20 || p.TargetUtilizationPercent > 90:
		return p, fmt.Errorf("Provisioned.TargetUtilizationPercent %d: must be between 20 and 90", p.TargetUtilizationPercent)
	}
	return p, nil
}

// RetryBackoff is one priority's retry wait.
type RetryBackoff = triageconfig.Backoff

// FunctionProps sizes one Lambda function.
type FunctionProps struct {
	// MemoryMiB is the memory size, which also sets the CPU share.
	MemoryMiB int
	// Timeout is the function timeout. The consumer polls until 40 s before
	// it and then drains, so it must be at least 1m, and a task whose own
	// timeout is longer than the consumer's cannot run on Lambda.
	Timeout time.Duration
}

// AlarmProps tunes the CloudWatch alarms.
type AlarmProps struct {
	// DLQDepthThreshold: a DLQ alarm fires when the DLQ holds more than this
	// many visible messages. Default 0, so any dead letter alarms.
	DLQDepthThreshold float64
	// OldestMessageAge: a queue alarm fires when its oldest message is older
	// than this. Default 30m, beyond the default low->medium->high promotion
	// path (10m + 20m), so a healthy backlog does not page anyone.
	OldestMessageAge time.Duration
	// Period is the evaluation period of every alarm. Default 5m.
	Period time.Duration
	// Topic, when set, receives every alarm's ALARM and OK notifications.
	Topic awssns.ITopic
}

// Limits and defaults the construct itself owns (the rest belong to the
// functions, see Props).
const (
	// MaxFanOut bounds the consumer schedule's fan-out. EventBridge allows
	// five targets per rule, so the construct makes one rule per five.
	MaxFanOut               = 50
	defaultPrefix           = "triage"
	defaultPromoteInterval  = time.Minute
	defaultOldestMessageAge = 30 * time.Minute
	defaultAlarmPeriod      = 5 * time.Minute
	// minConsumerTimeout leaves the consumer time to poll: it stops 40 s
	// before its deadline (consumerapp.LambdaReserve) to drain.
	minConsumerTimeout = time.Minute
)

// defaultFunctions returns the functions' default sizes. The API sits behind
// API Gateway, whose integration timeout is 30 s. The consumer runs up to
// five minutes, so with one started every minute up to five overlap per
// fan-out slot, and tasks of up to about five minutes fit.
func defaultFunctions() (api, consumer, promoter, counters FunctionProps) {
	return FunctionProps{MemoryMiB: 256, Timeout: 29 * time.Second},
		FunctionProps{MemoryMiB: 512, Timeout: 5 * time.Minute},
		FunctionProps{MemoryMiB: 256, Timeout: time.Minute},
		FunctionProps{MemoryMiB: 256, Timeout: time.Minute}
}

// resolved returns a copy of p with every default filled in, or an error
// naming the first invalid setting.
func (p *Props) resolved() (Props, error) {
	var r Props
	if p != nil {
		r = *p
	}
	if r.Prefix == "" {
		r.Prefix = defaultPrefix
	}
	if r.PromoteInterval == 0 {
		r.PromoteInterval = defaultPromoteInterval
	}
	if r.PromoteInterval < 0 {
		return r, fmt.Errorf("PromoteInterval %s: must be positive", r.PromoteInterval)
	}
	if m := r.PromoteInterval.Round(time.Minute); m < r.PromoteInterval {
		r.PromoteInterval = m + time.Minute
	} else {
		r.PromoteInterval = m
	}
	if r.FanOut == 0 {
		r.FanOut = 1
	}
	if r.FanOut < 1 || r.FanOut > MaxFanOut {
		return r, fmt.Errorf("FanOut %d: must be between 1 and %d", r.FanOut, MaxFanOut)
	}
	if r.FanOut != 1 && !r.Scheduled {
		return r, fmt.Errorf("FanOut %d: only the scheduled consumer fans out; set Scheduled, or bound the event-started consumers with Mapping.MaxConcurrency", r.FanOut)
	}
	def := spec.DefaultMapping()
	if r.Mapping.BatchSize == 0 {
		r.Mapping.BatchSize = def.BatchSize
	}
	if r.Mapping.MaxConcurrency == 0 {
		r.Mapping.MaxConcurrency = def.MaxConcurrency
	}
	if r.Mapping.Window == 0 {
		r.Mapping.Window = def.Window
	}
	switch m := r.Mapping; {
	case m.BatchSize < 1 || m.BatchSize > 10:
		return r, fmt.Errorf("Mapping.BatchSize %d: must be between 1 and 10", m.BatchSize)
	case m.Window < 0 || m.Window > 5*time.Minute || m.Window%time.Second != 0:
		return r, fmt.Errorf("Mapping.Window %s: must be whole seconds from 0 to 5m", m.Window)
	case m.MaxConcurrency < 2 || m.MaxConcurrency > 1000:
		return r, fmt.Errorf("Mapping.MaxConcurrency %d: must be between 2 and 1000", m.MaxConcurrency)
	}
	for name, d := range map[string]time.Duration{
		"PromoteLowAfter": r.PromoteLowAfter, "PromoteMediumAfter": r.PromoteMediumAfter,
		"Retention": r.Retention, "PollWait": r.PollWait,
	} {
		if d < 0 {
			return r, fmt.Errorf("%s %s: must be positive", name, d)
		}
	}
	if r.EventBus != nil && !r.Events {
		return r, fmt.Errorf("EventBus is set but Events is false: set Events to put lifecycle events on it")
	}
	if r.EventWebhooks != "" && r.WebhookSecret == nil {
		return r, fmt.Errorf("EventWebhooks needs WebhookSecret: event deliveries are always signed")
	}
	if err := validateRoutes(r.Routes); err != nil {
		return r, err
	}
	if _, err := scheduleItems(r); err != nil {
		return r, err
	}
	if r.Metrics.Namespace == "" {
		r.Metrics.Namespace = defaultMetricNamespace
	}
	if r.Metrics.HighWaitP99 == 0 {
		r.Metrics.HighWaitP99 = defaultHighWaitP99
	}
	if r.Metrics.FailureRatePercent == 0 {
		r.Metrics.FailureRatePercent = defaultFailureRate
	}
	if r.LogRetention == "" {
		r.LogRetention = awslogs.RetentionDays_ONE_MONTH
	}
	if r.RemovalPolicy == "" {
		r.RemovalPolicy = awscdk.RemovalPolicy_RETAIN
	}
	var err error
	if r.Provisioned != nil {
		pv, err := r.Provisioned.withDefaults()
		if err != nil {
			return r, err
		}
		r.Provisioned = &pv
	}
	defaultAPI, defaultConsumer, defaultPromoter, defaultCounters := defaultFunctions()
	if r.API, err = r.API.withDefaults("API", defaultAPI); err != nil {
		return r, err
	}
	if r.Consumer, err = r.Consumer.withDefaults("Consumer", defaultConsumer); err != nil {
		return r, err
	}
	if r.Promoter, err = r.Promoter.withDefaults("Promoter", defaultPromoter); err != nil {
		return r, err
	}
	if r.Counters, err = r.Counters.withDefaults("Counters", defaultCounters); err != nil {
		return r, err
	}
	if r.Consumer.Timeout < minConsumerTimeout {
		return r, fmt.Errorf("Consumer.Timeout %s: must be at least %s, since the consumer stops polling well before its deadline to drain", r.Consumer.Timeout, minConsumerTimeout)
	}
	// The functions' settings are checked by the functions' own decoder
	// and rules (weights, reserved slots, retry backoff, routes, shards,
	// types, durations, log level), so what synthesizes also starts.
	env := settingsEnv(r)
	if _, err := triageconfig.FromEnv(func(k string) string { return env[k] }); err != nil {
		return r, fmt.Errorf("settings: %w", err)
	}
	if r.Alarms.DLQDepthThreshold < 0 {
		return r, fmt.Errorf("Alarms.DLQDepthThreshold %v: must not be negative", r.Alarms.DLQDepthThreshold)
	}
	if r.Alarms.OldestMessageAge == 0 {
		r.Alarms.OldestMessageAge = defaultOldestMessageAge
	}
	if r.Alarms.Period == 0 {
		r.Alarms.Period = defaultAlarmPeriod
	}
	if r.Alarms.Period < time.Minute || r.Alarms.Period%time.Minute != 0 {
		return r, fmt.Errorf("Alarms.Period %s: must be a whole number of minutes", r.Alarms.Period)
	}
	if r.ConsumerPackage == "" {
		r.ConsumerPackage = DefaultConsumerPackage
	}
	if err := validatePackage(r.ConsumerPackage); err != nil {
		return r, fmt.Errorf("ConsumerPackage: %w", err)
	}
	if r.BuildLog == nil {
		r.BuildLog = os.Stderr
	}
	if r.SourceRoot == "" {
		if r.SourceRoot, err = FindRepoRoot("."); err != nil {
			return r, fmt.Errorf("SourceRoot not set, and %w", err)
		}
	} else {
		if r.SourceRoot, err = filepath.Abs(r.SourceRoot); err != nil {
			return r, fmt.Errorf("SourceRoot: %w", err)
		}
		if err := checkSourceRoot(r.SourceRoot); err != nil {
			return r, err
		}
	}
	return r, nil
}

// validatePackage checks that pkg can only name one package to `go build`:
// not empty, not a flag, no spaces, no "..." pattern.
func validatePackage(pkg string) error {
	switch {
	case strings.TrimSpace(pkg) == "":
		return fmt.Errorf("%q: must name a Go package", pkg)
	case strings.HasPrefix(pkg, "-"):
		return fmt.Errorf("%q: must be a package, not a flag", pkg)
	case strings.ContainsAny(pkg, " \t\r\n"):
		return fmt.Errorf("%q: must not contain spaces", pkg)
	case strings.Contains(pkg, "..."):
		return fmt.Errorf("%q: must name one package, not a pattern", pkg)
	}
	return nil
}

// withDefaults fills the zero fields of f from def and checks Lambda's limits.
func (f FunctionProps) withDefaults(name string, def FunctionProps) (FunctionProps, error) {
	if f.MemoryMiB == 0 {
		f.MemoryMiB = def.MemoryMiB
	}
	if f.Timeout == 0 {
		f.Timeout = def.Timeout
	}
	if f.MemoryMiB < 128 || f.MemoryMiB > 10240 {
		return f, fmt.Errorf("%s.MemoryMiB %d: Lambda allows 128 to 10240", name, f.MemoryMiB)
	}
	if f.Timeout < time.Second || f.Timeout > 15*time.Minute || f.Timeout%time.Second != 0 {
		return f, fmt.Errorf("%s.Timeout %s: Lambda allows whole seconds from 1s to 15m", name, f.Timeout)
	}
	return f, nil
}

// validateRoutes checks what can be checked at synth time: type names and
// targets must survive the "type=target,..." encoding, and literal targets
// must be a Lambda ARN or an http(s) URL.
func validateRoutes(routes map[string]string) error {
	for typ, target := range routes {
		if typ == "" || strings.ContainsAny(typ, ",= ") {
			return fmt.Errorf("route %q: a task type must be non-empty without ',', '=' or spaces", typ)
		}
		if target == "" || strings.Contains(target, ",") {
			return fmt.Errorf("route %s: target %q must be non-empty without ','", typ, target)
		}
	}
	return nil
}

// isLambdaTarget reports whether a route target is a Lambda ARN: a literal
// ARN or a token (a construct's FunctionArn), which can only be an ARN here.
func isLambdaTarget(target string) bool {
	return strings.HasPrefix(target, "arn:") || *awscdk.Token_IsUnresolved(target)
}

// routesEnv encodes routes as TRIAGE_ROUTES expects, sorted by type so the
// template does not change from one synth to the next.
func routesEnv(routes map[string]string) string {
	parts := make([]string, 0, len(routes))
	for _, t := range sortedKeys(routes) {
		parts = append(parts, t+"="+routes[t])
	}
	return strings.Join(parts, ",")
}

// settingsEnv is the TRIAGE_* settings the functions get from r, with
// deploy-time tokens (a route to a function of the same app, the webhook
// secret) replaced by a value of their shape, for CheckEnv.
func settingsEnv(r Props) map[string]string {
	routes := map[string]string{}
	for typ, target := range r.Routes {
		if *awscdk.Token_IsUnresolved(target) {
			target = "arn:aws:lambda:us-east-1:123456789012:function:resolved-at-deploy"
		}
		routes[typ] = target
	}
	r.Routes, r.WebhookSecret = routes, nil
	return merge(consumerEnv(r), typesEnv(r), tableEnv(r), map[string]string{
		triageconfig.EnvLowAfter:    durationEnv(r.PromoteLowAfter),
		triageconfig.EnvMediumAfter: durationEnv(r.PromoteMediumAfter),
		triageconfig.EnvLogLevel:    r.LogLevel,
	})
}
