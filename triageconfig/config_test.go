package triageconfig

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/triagetype"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Weights[triagetype.High] != 6 || c.Weights[triagetype.Medium] != 3 || c.Weights[triagetype.Low] != 1 {
		t.Errorf("weights %v", c.Weights)
	}
	if c.LowAfter != 10*time.Minute || c.MediumAfter != 20*time.Minute || c.PromoteInterval != time.Minute {
		t.Errorf("promotion %v %v %v", c.LowAfter, c.MediumAfter, c.PromoteInterval)
	}
	if c.Addr != "127.0.0.1:8080" || c.Table != "triage-tasks" || c.MaxDepthHigh != 2*c.MaxDepth {
		t.Errorf("addr %s table %s depth %d/%d", c.Addr, c.Table, c.MaxDepth, c.MaxDepthHigh)
	}
	if c.DemoHandlers {
		t.Errorf("demo handlers on by default")
	}
	if c.TypeIndex {
		t.Errorf("type index on by default")
	}
}

func TestOverrides(t *testing.T) {
	c, err := FromEnv(env(map[string]string{
		EnvPrefix: "acme", EnvWeights: "high=8,low=2", EnvStrict: "true", EnvLowAfter: "2s",
		EnvRoutes: "a=https://example.test/hook,b=arn:aws:lambda:us-east-1:1:function:f", EnvMaxDepth: "10",
		EnvDemoHandlers: "true", EnvTypeIndex: "true",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Table != "acme-tasks" || !c.Strict || c.LowAfter != 2*time.Second || c.Weights[triagetype.High] != 8 || c.Weights[triagetype.Medium] != 3 {
		t.Errorf("config %+v", c)
	}
	if len(c.Routes) != 2 || c.MaxDepth != 10 || c.MaxDepthHigh != 20 {
		t.Errorf("routes %v depth %d/%d", c.Routes, c.MaxDepth, c.MaxDepthHigh)
	}
	if !c.DemoHandlers {
		t.Errorf("%s=true: demo handlers off", EnvDemoHandlers)
	}
	if !c.TypeIndex {
		t.Errorf("%s=true: type index off", EnvTypeIndex)
	}
}

func TestErrorsNameTheVariable(t *testing.T) {
	tests := map[string]string{
		EnvWeights:      "high=x",
		EnvStrict:       "maybe",
		EnvDemoHandlers: "yes please",
		EnvTypeIndex:    "on",
		EnvConcurrency:  "-1",
		EnvLowAfter:     "soon",
		EnvRoutes:       "a=ftp://x",
		EnvReservedHigh: "99",
		EnvRetryBackoff: "high=10s:1s",
	}
	for k, v := range tests {
		_, err := FromEnv(env(map[string]string{k: v}))
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%q: err %v, want one naming %s", k, v, err, k)
		}
	}
}

func TestParseBackoff(t *testing.T) {
	tests := []struct {
		in      string
		want    map[triagetype.Priority]Backoff
		wantErr string
	}{
		{in: "", want: nil},
		{in: "high=1s:10s", want: map[triagetype.Priority]Backoff{triagetype.High: {time.Second, 10 * time.Second, DefaultJitter}}},
		{in: " low = 2s:2m , medium=500ms:500ms", want: map[triagetype.Priority]Backoff{
			triagetype.Low: {2 * time.Second, 2 * time.Minute, DefaultJitter}, triagetype.Medium: {500 * time.Millisecond, 500 * time.Millisecond, DefaultJitter}}},
		{in: "urgent=1s:2s", wantErr: "urgent"},
		{in: "high", wantErr: "priority=base:cap"},
		{in: "high=1s", wantErr: "base:cap"},
		{in: "high=x:1s", wantErr: "base of high"},
		{in: "high=1s:0s", wantErr: "cap of high"},
		{in: "low=1m:30s", wantErr: "below base"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseBackoff(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for p, b := range tt.want {
				if got[p] != b {
					t.Errorf("%s: got %+v, want %+v", p, got[p], b)
				}
			}
		})
	}
}

func TestDecodeSetsOnlyWhatIsGiven(t *testing.T) {
	c, err := Decode(env(map[string]string{EnvConcurrency: "4", EnvWeights: "high=9"}))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Concurrency: 4, Weights: map[triagetype.Priority]int{triagetype.High: 9}}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Decode = %+v, want %+v", c, want)
	}
}

func TestZeroDecodesToOff(t *testing.T) {
	c, err := FromEnv(env(map[string]string{EnvReservedHigh: "0", EnvMaxDepth: "0", EnvFanOutMax: "0"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.ReservedHigh != Off || c.MaxDepth != Off || c.MaxDepthHigh != Off || c.FanOutMax != Off {
		t.Errorf("reserved %d, depth %d/%d, fan-out %d: want Off (%d) for each", c.ReservedHigh, c.MaxDepth, c.MaxDepthHigh, c.FanOutMax, Off)
	}
	if _, err := FromEnv(env(map[string]string{EnvConcurrency: "0"})); err == nil || !strings.Contains(err.Error(), EnvConcurrency) {
		t.Errorf("%s=0: err %v, want one naming it", EnvConcurrency, err)
	}
}

func TestWithDefaults(t *testing.T) {
	given := Config{Prefix: "acme", Weights: map[triagetype.Priority]int{triagetype.Low: 0}, ReservedHigh: Off,
		RetryBackoff: map[triagetype.Priority]Backoff{triagetype.High: {Base: 2 * time.Second, Max: 4 * time.Second}}}
	c := given.WithDefaults()
	if c.Table != "acme-tasks" || c.Bucket != "acme-blobs" || c.Concurrency != DefaultConcurrency || c.Lease != DefaultLease {
		t.Errorf("defaults not applied: %+v", c)
	}
	if c.ReservedHigh != Off {
		t.Errorf("ReservedHigh Off became %d", c.ReservedHigh)
	}
	if c.Weights[triagetype.High] != 6 || c.Weights[triagetype.Medium] != 3 || c.Weights[triagetype.Low] != 0 {
		t.Errorf("weights %v: want the given low=0 and the defaults for the others", c.Weights)
	}
	if c.RetryBackoff[triagetype.High].Base != 2*time.Second || c.RetryBackoff[triagetype.Low] != DefaultBackoff()[triagetype.Low] {
		t.Errorf("backoff %v", c.RetryBackoff)
	}
	if len(given.Weights) != 1 || len(given.RetryBackoff) != 1 {
		t.Errorf("WithDefaults changed the caller's maps: %v %v", given.Weights, given.RetryBackoff)
	}
	if again := c.WithDefaults(); !reflect.DeepEqual(again, c) {
		t.Errorf("WithDefaults is not idempotent:\n%+v\n%+v", again, c)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"reserved equals concurrency", func(c *Config) { c.Concurrency, c.ReservedHigh = 4, 4 }, "ReservedHigh"},
		{"reserved below Off", func(c *Config) { c.ReservedHigh = -2 }, "ReservedHigh"},
		{"too many shards", func(c *Config) { c.Shards = 257 }, "Shards"},
		{"all weights zero", func(c *Config) {
			c.Weights = map[triagetype.Priority]int{triagetype.High: 0, triagetype.Medium: 0, triagetype.Low: 0}
		}, "Weights"},
		{"negative weight", func(c *Config) { c.Weights[triagetype.Low] = -1 }, "Weights"},
		{"unknown priority", func(c *Config) { c.Weights["urgent"] = 1 }, "Weights"},
		{"backoff cap below base", func(c *Config) { c.RetryBackoff[triagetype.Low] = Backoff{Base: time.Minute, Max: time.Second} }, "RetryBackoff"},
		{"backoff jitter", func(c *Config) {
			c.RetryBackoff[triagetype.Low] = Backoff{Base: time.Second, Max: time.Second, Jitter: 0.9}
		}, "RetryBackoff"},
		{"negative lease", func(c *Config) { c.Lease = -time.Second }, "Lease"},
		{"bad type", func(c *Config) { c.Types = []string{"a#b"} }, "Types"},
		{"bad route", func(c *Config) { c.Routes["x"] = "ftp://x" }, "Routes"},
		{"log level", func(c *Config) { c.LogLevel = "loud" }, "LogLevel"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{}.WithDefaults()
			tt.edit(&c)
			var fe *Error
			if err := c.Validate(); !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("Validate = %v, want a Error for %s", err, tt.field)
			}
		})
	}
}

func TestBackoffWait(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	b := Backoff{Base: time.Second, Max: 10 * time.Second}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 4: 8 * time.Second, 5: 10 * time.Second, 30: 10 * time.Second} {
		if got := b.Wait(n, rng); got != want {
			t.Errorf("attempt %d: wait %s, want %s", n, got, want)
		}
	}
	b.Jitter = 0.5
	for range 100 {
		if got := b.Wait(5, rng); got < 5*time.Second || got > 10*time.Second {
			t.Fatalf("jittered wait %s outside [5s, 10s]", got)
		}
	}
}

func TestAPIURL(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"", true},
		{"https://abc.execute-api.us-east-1.amazonaws.com", true},
		{"http://127.0.0.1:8080/", true},
		{"abc.execute-api.us-east-1.amazonaws.com", false},
		{"ftp://host", false},
	} {
		c, err := Decode(func(k string) string {
			if k == EnvAPIURL {
				return tc.url
			}
			return ""
		})
		if err != nil {
			t.Fatalf("Decode: %v", err)
		}
		if c.APIURL != tc.url {
			t.Errorf("APIURL = %q, want %q", c.APIURL, tc.url)
		}
		err = c.WithDefaults().Validate()
		var fe *Error
		if tc.ok && err != nil && errors.As(err, &fe) && fe.Env == EnvAPIURL {
			t.Errorf("%q: %v, want valid", tc.url, err)
		}
		if !tc.ok && (!errors.As(err, &fe) || fe.Env != EnvAPIURL) {
			t.Errorf("%q: %v, want an error naming %s", tc.url, err, EnvAPIURL)
		}
	}
}
