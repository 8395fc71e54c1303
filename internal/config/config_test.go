package config

import (
	"strings"
	"testing"
	"time"

	"github.com/triagehq/triage/internal/task"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaults(t *testing.T) {
	c, err := FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Weights[task.High] != 6 || c.Weights[task.Medium] != 3 || c.Weights[task.Low] != 1 {
		t.Errorf("weights %v", c.Weights)
	}
	if c.LowAfter != 10*time.Minute || c.MediumAfter != 20*time.Minute || c.PromoteInterval != time.Minute {
		t.Errorf("promotion %v %v %v", c.LowAfter, c.MediumAfter, c.PromoteInterval)
	}
	if c.Addr != "127.0.0.1:8080" || c.Spec.Table.Name != "triage-tasks" || c.MaxDepthHigh != 2*c.MaxDepth {
		t.Errorf("addr %s table %s depth %d/%d", c.Addr, c.Spec.Table.Name, c.MaxDepth, c.MaxDepthHigh)
	}
	if c.DemoHandlers {
		t.Errorf("demo handlers on by default")
	}
}

func TestOverrides(t *testing.T) {
	c, err := FromEnv(env(map[string]string{
		EnvPrefix: "acme", EnvWeights: "high=8,low=2", EnvStrict: "true", EnvLowAfter: "2s",
		EnvRoutes: "a=https://example.test/hook,b=arn:aws:lambda:us-east-1:1:function:f", EnvMaxDepth: "10",
		EnvDemoHandlers: "true",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Spec.Table.Name != "acme-tasks" || !c.Strict || c.LowAfter != 2*time.Second || c.Weights[task.High] != 8 || c.Weights[task.Medium] != 3 {
		t.Errorf("config %+v", c)
	}
	if len(c.Routes) != 2 || c.MaxDepth != 10 || c.MaxDepthHigh != 20 {
		t.Errorf("routes %v depth %d/%d", c.Routes, c.MaxDepth, c.MaxDepthHigh)
	}
	if !c.DemoHandlers {
		t.Errorf("%s=true: demo handlers off", EnvDemoHandlers)
	}
}

func TestErrorsNameTheVariable(t *testing.T) {
	tests := map[string]string{
		EnvWeights:      "high=x",
		EnvStrict:       "maybe",
		EnvDemoHandlers: "yes please",
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
		want    map[task.Priority]Backoff
		wantErr string
	}{
		{in: "", want: map[task.Priority]Backoff{}},
		{in: "high=1s:10s", want: map[task.Priority]Backoff{task.High: {time.Second, 10 * time.Second}}},
		{in: " low = 2s:2m , medium=500ms:500ms", want: map[task.Priority]Backoff{
			task.Low: {2 * time.Second, 2 * time.Minute}, task.Medium: {500 * time.Millisecond, 500 * time.Millisecond}}},
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
