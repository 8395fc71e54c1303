package main

import (
	"path/filepath"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
)

func TestOutDir(t *testing.T) {
	root := filepath.FromSlash("/repo")
	for _, c := range []struct{ env, want string }{
		{"", filepath.Join(root, "cdk.out")},
		{"cdk.out", "cdk.out"}, // relative to the root, the app's working directory
		{filepath.FromSlash("/tmp/out"), filepath.FromSlash("/tmp/out")},
	} {
		if got := outDir(root, c.env); got != c.want {
			t.Errorf("outDir(%q, %q) = %q, want %q", root, c.env, got, c.want)
		}
	}
}

func TestPropsFromContext(t *testing.T) {
	ctx := map[string]string{
		"prefix":        "acme",
		"fanOut":        "3",
		"scheduled":     "true",
		"dashboard":     "true",
		"iamAuth":       "true",
		"demoHandlers":  "true",
		"routes":        "resize=arn:aws:lambda:eu-west-1:123456789012:function:resize, notify=https://hooks.example.com/x",
		"removalPolicy": "destroy",
	}
	p, err := propsFromContext(nil, func(k string) string { return ctx[k] })
	if err != nil {
		t.Fatal(err)
	}
	if p.Prefix != "acme" || p.FanOut != 3 || !p.Scheduled || !p.Metrics.Dashboard || !p.IAMAuth || !p.DemoHandlers || p.RemovalPolicy != awscdk.RemovalPolicy_DESTROY {
		t.Errorf("props = %+v", p)
	}
	// The app keeps the fixed names TriageStack has always had, unless told.
	if !p.PhysicalNames {
		t.Error("PhysicalNames off by default in the app: a deployed TriageStack would be replaced")
	}
	ctx["physicalNames"] = "false"
	if p, err := propsFromContext(nil, func(k string) string { return ctx[k] }); err != nil || p.PhysicalNames {
		t.Errorf("physicalNames=false: PhysicalNames %v, err %v", p != nil && p.PhysicalNames, err)
	}
	if len(p.Routes) != 2 || p.Routes["notify"] != "https://hooks.example.com/x" {
		t.Errorf("routes = %v", p.Routes)
	}

	for key, bad := range map[string]string{"fanOut": "many", "iamAuth": "perhaps", "demoHandlers": "maybe", "physicalNames": "some", "routes": "nonsense", "removalPolicy": "snapshot"} {
		if _, err := propsFromContext(nil, func(k string) string {
			if k == key {
				return bad
			}
			return ""
		}); err == nil {
			t.Errorf("context %s=%q accepted", key, bad)
		}
	}
}
