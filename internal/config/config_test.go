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
}

func TestOverrides(t *testing.T) {
	c, err := FromEnv(env(map[string]string{
		EnvPrefix: "acme", EnvWeights: "high=8,low=2", EnvStrict: "true", EnvLowAfter: "2s",
		EnvRoutes: "a=https://example.test/hook,b=arn:aws:lambda:us-east-1:1:function:f", EnvMaxDepth: "10",
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
}

func TestErrorsNameTheVariable(t *testing.T) {
	tests := map[string]string{
		EnvWeights:      "high=x",
		EnvStrict:       "maybe",
		EnvConcurrency:  "-1",
		EnvLowAfter:     "soon",
		EnvRoutes:       "a=ftp://x",
		EnvReservedHigh: "99",
	}
	for k, v := range tests {
		_, err := FromEnv(env(map[string]string{k: v}))
		if err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%q: err %v, want one naming %s", k, v, err, k)
		}
	}
}
